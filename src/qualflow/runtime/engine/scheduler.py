"""Which tokens run in the next model step, under a per-step token budget.

Every step is one packed forward over (sequence, chunk) pairs:
  - decode: each prefilled running sequence contributes its one new token;
  - prefill: prompts (or the rest of a chunked prompt, or a preempted sequence's recompute) take
    what is left of the budget, running partial prefills first, then waiting sequences oldest first.
    A prompt longer than the budget is chunked, so it holds decodes up for at most one step.
With `mixed` (EngineConfig) both kinds go into one step; without it (the default) steps alternate,
so the decodes of a pure decode step replay a captured graph: a prefill step is followed by at least
one decode step, and while requests decode, a prefill step that admits new prompts waits until the
prompts it can admit have waited, together, `prefill_wait_factor` decode steps per decoding request.
A small prefill step holds every decode back for about one step whatever its size, while a waiting
prompt loses one step per step it waits: the rule admits once what waiting cost reaches what a
prefill step costs (the rent-or-buy balance at 1.0). Prompts that arrive one by one (a server's
clients, batch slots that free up one at a time) then share a prefill step, and a burst that finds
few decodes goes at once. A prompt does not wait when nothing decodes, when the prompts that can be
admitted fill the token budget, or to continue a chunked prompt (it alternates with decodes).
`prefill_wait_factor=0` runs a prefill step whenever a prompt waits and the last step decoded.

A sequence whose last token is sampled but not read back yet (overlapped scheduling) is not
scheduled again: that step's token would be discarded. Neither is one in `held` (the engine puts a
thinking sequence there while its next sample waits for the token in flight: engine.thinking).

Admission is FIFO: the head of the queue waits until its chunk's blocks are free, nobody overtakes
it. Admitted, it first takes the blocks of its prefix that the prefix cache holds (block_manager):
its prefill starts after them (so the step is not a fresh one), and the count of prompt tokens so
served is its `timing.cached_tokens` (set at its first admission). At every step's start the full
blocks that launched steps computed are registered in the cache (on the host, while the device runs
the step before).

When a running sequence needs a block and the pool is empty, the newest running sequence is
preempted: its blocks are freed and it goes back to the front of the queue, to be recomputed from
its tokens (prompt + output so far) when it is admitted again; its computed full blocks stay in the
prefix cache, so that recompute mostly finds them there.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import dataclass

from ..config import EngineConfig
from .block_manager import BlockManager
from .sequence import Sequence


@dataclass
class Batch:
    seqs: list[Sequence]
    starts: list[int]  # first position computed in this step, per sequence
    counts: list[int]  # tokens computed in this step, per sequence
    samples: list[bool]  # the step reaches the sequence's last token: sample its next one

    @property
    def is_decode(self) -> bool:
        return all(c == 1 for c in self.counts) and all(s > 0 for s in self.starts)

    @property
    def num_tokens(self) -> int:
        return sum(self.counts)


class Scheduler:
    def __init__(self, cfg: EngineConfig, blocks: BlockManager):
        """Reads max_batch, the token budget, mixed and prefill_wait_factor of `cfg`."""
        if not cfg.prefill_wait_factor >= 0:
            raise ValueError(
                f"prefill_wait_factor must be 0 or more, not {cfg.prefill_wait_factor}"
            )
        self.blocks, self.max_batch, self.budget = blocks, cfg.max_batch, cfg.token_budget()
        self.mixed = cfg.mixed
        self.prefill_wait_factor = cfg.prefill_wait_factor
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.watermark = max(
            1, blocks.capacity // 100
        )  # admission leaves this much for running decodes
        self._decodes_since_prefill = 1  # decode steps run since the last prefill step
        self.num_prefill_steps = self.num_decode_steps = 0
        self.num_preemptions = 0
        self.held: set[Sequence] = set()

    def add(self, seq: Sequence) -> None:
        seq.queued_at_step = self.num_decode_steps
        self.waiting.append(seq)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def find(self, request_id: str) -> list[Sequence]:
        return [s for s in list(self.waiting) + self.running if s.req.request_id == request_id]

    def reap(self) -> None:
        """Free the blocks of finished sequences (no K/V moves) and drop them."""
        if any(s.done for s in self.running):
            for s in self.running:
                if s.done:
                    self.blocks.release(s)
            self.running = [s for s in self.running if not s.done]
        if any(s.done for s in self.waiting):
            self.waiting = deque(s for s in self.waiting if not s.done)

    # ---- one step -----------------------------------------------------------------------------
    def schedule(self) -> Batch | None:
        self.reap()
        for s in self.running:  # what launched steps computed is in the prefix cache from now on
            self.blocks.commit(s)
        admitted = False
        ready = [s for s in self.running if s.decoding and not s.exhausted]
        if self.held:
            ready = [s for s in ready if s not in self.held]
        prefill_work = bool(self.waiting) or any(not r.decoding for r in self.running)
        do_prefill = prefill_work and (self.mixed or not ready or self._prefill_due(len(ready)))
        chosen: dict[Sequence, int] = {}  # insertion order is the batch order
        budget = self.budget
        if self.mixed or not do_prefill:
            for s in ready:
                if s.decoding and self._reserve(s, 1, chosen):  # not decoding any more: preempted
                    chosen[s] = 1
            budget -= len(chosen)
        if do_prefill:
            for s in [r for r in self.running if not r.decoding]:
                if budget <= 0:
                    break
                n = min(s.remaining, budget)
                if s.num_computed > 0 and self._reserve(s, n, chosen):  # 0: preempted in this step
                    chosen[s] = n
                    budget -= n
            budget = self.budget - sum(chosen.values())
            while self.waiting and budget > 0 and len(self.running) < self.max_batch:
                s = self.waiting[0]
                n = self._admit(s, budget)
                if not n:
                    break  # FIFO: the head waits for blocks
                self.waiting.popleft()
                self.running.append(s)
                chosen[s] = n
                budget -= n
                admitted = True
        if (
            not chosen and ready and not (self.mixed or not do_prefill)
        ):  # no prefill fits yet: decode
            for s in ready:
                if s.decoding and self._reserve(s, 1, chosen):
                    chosen[s] = 1
        if not chosen:
            return None
        if admitted or any(not s.decoding for s in chosen):
            self._decodes_since_prefill = 0
            self.num_prefill_steps += 1
        else:
            self._decodes_since_prefill += 1
            self.num_decode_steps += 1
        seqs = list(chosen)
        batch = Batch(
            seqs,
            [s.num_computed for s in seqs],
            [chosen[s] for s in seqs],
            [s.num_computed + chosen[s] == len(s.token_ids) for s in seqs],
        )
        for s, n in zip(seqs, batch.counts):
            s.num_computed += n
        return batch

    def _admit(self, s: Sequence, budget: int) -> int:
        """Give the waiting head `s` its cached prefix (BlockManager.match) and the blocks of its
        next chunk; the chunk's size, 0 (nothing taken) when the pool cannot hold it yet."""
        hits = self.blocks.match(s)
        computed = len(hits) * self.blocks.block_size
        n = min(len(s.token_ids) - computed, budget)
        need = self.blocks.hit_cost(hits) + self.blocks.needed(s, computed + n) - len(hits)
        if not self.blocks.can_allocate(need, self.watermark if self.running else 0):
            return 0
        self.blocks.take(s, hits)
        self.blocks.allocate(s, computed + n)
        if s.timing.first_scheduled_ns is None:  # the request's first admission
            s.timing.first_scheduled_ns = time.time_ns()
            s.timing.cached_tokens = computed
        return n

    def _prefill_due(self, decoding: int) -> bool:
        """Alternating, with `decoding` requests ready to decode: whether this step is a prefill
        step (module docstring)."""
        if self._decodes_since_prefill == 0:  # the last step was one: decode now
            return False
        if not self.prefill_wait_factor or any(not r.decoding for r in self.running):
            return True
        waited = tokens = 0
        for s in itertools.islice(self.waiting, max(0, self.max_batch - len(self.running))):
            waited += self.num_decode_steps - s.queued_at_step
            tokens += s.remaining
        return tokens >= self.budget or waited >= self.prefill_wait_factor * decoding

    def _reserve(self, seq: Sequence, n: int, chosen: dict[Sequence, int]) -> bool:
        """Blocks for `seq`'s next `n` tokens, preempting the newest running sequences if the
        pool is empty. False when `seq` itself had to go."""
        need = self.blocks.needed(seq, seq.num_computed + n)
        while not self.blocks.can_allocate(need):
            victim = self.running[-1]
            self._preempt(victim)
            chosen.pop(
                victim, None
            )  # if it was already in this step, its tokens are simply not run
            if victim is seq:
                return False
        self.blocks.allocate(seq, seq.num_computed + n)
        return True

    def _preempt(self, seq: Sequence) -> None:
        self.blocks.release(seq)
        seq.num_computed = 0
        seq.preemptions += 1
        self.num_preemptions += 1
        self.running.remove(seq)
        seq.queued_at_step = self.num_decode_steps
        self.waiting.appendleft(seq)
