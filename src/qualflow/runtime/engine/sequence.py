"""One request inside the engine: its tokens, how many of them have K/V in the cache, its block
table, its timing and where its output goes.

A token sampled by a step whose result is not read back yet is held in `token_ids` as PLACEHOLDER,
with `pending` naming where it is on the device (step, row): the next step's inputs take it from
there, and `resolve` writes the real id once it is on the host (overlapped scheduling)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..api.events import TaskTiming
from ..api.request import GenerationRequest
from .outputs import Sink
from .thinking import ThinkState

PLACEHOLDER = -1


def put_ids(out: np.ndarray, tokens: list[int]) -> None:
    """A step's input `tokens` into `out` (int64, as long), a PLACEHOLDER as 0 (the step's device
    copy fills it). Vectorised: a 1,024-token prompt's list comprehension cost ~0.1 ms of the
    host's time before its prefill step could launch."""
    out[:] = tokens
    np.maximum(out, 0, out=out)


@dataclass(eq=False)
class Sequence:
    req: GenerationRequest
    sink: Sink  # Tokens as sampled, then one Final
    timing: TaskTiming
    out: list[int] = field(default_factory=list)
    generator: torch.Generator | None = None
    done: bool = False
    token_ids: list[int] = field(default_factory=list)  # prompt + out: what the cache must hold
    num_computed: int = 0  # leading tokens whose K/V is in the cache
    block_table: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)  # chained keys of its full blocks
    num_committed: int = 0  # leading blocks of block_table registered in the prefix cache
    preemptions: int = 0
    max_len: int = 1 << 62  # prompt + output, the engine's context limit
    pending: tuple[int, int] | None = None  # (step, row) of the sampled token not read back yet
    think: ThinkState | None = None  # thinking on: its think block (engine.thinking)
    grammar: object | None = None  # constrained: its GrammarState (engine.grammar_steps)
    queued_at_step: int = 0  # the scheduler's decode-step count when it joined the queue

    def __post_init__(self) -> None:
        if not self.token_ids:
            self.token_ids = list(self.req.prompt_token_ids)

    @property
    def length(self) -> int:  # tokens whose KV is (or is about to be) in the cache
        return len(self.token_ids)

    @property
    def remaining(self) -> int:  # tokens still to run through the model before the next sample
        return len(self.token_ids) - self.num_computed

    @property
    def decoding(self) -> bool:  # prefilled: only the last sampled token is new
        return self.num_computed > 0 and self.remaining == 1

    @property
    def sampled(self) -> int:  # output tokens sampled so far, read back or not
        return len(self.token_ids) - len(self.req.prompt_token_ids)

    @property
    def exhausted(self) -> bool:  # its last token is sampled: another step could only be discarded
        return self.sampled >= self.req.params.max_new_tokens or len(self.token_ids) >= self.max_len

    def append(self, token: int) -> None:
        self.out.append(token)
        self.token_ids.append(token)

    def resolve(self, token: int) -> None:
        """The oldest sampled-but-unread token is `token`: replace its placeholder, add it to
        out."""
        self.token_ids[len(self.req.prompt_token_ids) + len(self.out)] = token
        self.out.append(token)
