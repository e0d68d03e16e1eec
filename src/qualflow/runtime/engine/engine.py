"""The engine: one thread owns the model and runs continuous batching over a paged KV cache.

At every step boundary:
  1. take new submissions and cancellations from the inbox (thread-safe, FIFO);
  2. the scheduler picks the step's tokens under its token budget (decodes, prefill chunks) and
     the blocks they need, preempting the newest sequence if the pool is full;
  3. the model runner runs them as one packed forward (a captured graph for decode-only steps);
  4. sample, emit, and free the blocks of finished sequences (nothing is copied).

Delivery goes through each request's `sink` (engine.outputs): Tokens as they are sampled, then exactly
one Final. `on_step`, when set, is called on the engine thread after each loop iteration (all of that
step's items are out): a caller that forwards items elsewhere sends them there once per step.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable

import torch

from ..api.events import TaskTiming
from ..api.request import GenerationRequest
from .model_runner import ModelRunner
from .outputs import Final, Sink, Tokens
from .sampling import sample
from .scheduler import Batch, Scheduler
from .sequence import Sequence
from .threads import thread_death

log = logging.getLogger("qualflow.engine")
_STOP = object()


@dataclass(frozen=True, slots=True)
class _Cancel:
    """An inbox entry: end the request of this id (a submission is its Sequence itself)."""
    request_id: str


class Engine:
    def __init__(self, runner: ModelRunner, scheduler: Scheduler, max_len: int, device: torch.device,
                 step_delay_s: float = 0.0):
        self.runner, self.scheduler, self.device, self.max_len = runner, scheduler, device, max_len
        self.step_delay_s = step_delay_s          # test-only slowdown, 0 in production
        self.lock = threading.Lock()              # held while the model runs
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.steps = 0
        self.on_step: Callable[[], None] | None = None
        self.thread = threading.Thread(target=self._loop, name="qualflow-engine", daemon=True)
        self.thread.start()

    @property
    def waiting(self) -> list[Sequence]:
        return list(self.scheduler.waiting)

    @property
    def running(self) -> list[Sequence]:
        return [s for s in self.scheduler.running if not s.done]

    # ---- called from any thread -------------------------------------------------------------
    def submit(self, req: GenerationRequest, sink: Sink, timing: TaskTiming | None = None) -> Sequence:
        """`timing`: stamps begun elsewhere (the engine process gets the caller's submission time)."""
        seq = Sequence(req, sink, timing or TaskTiming(submitted_ns=time.time_ns()))
        if req.params.seed is not None:
            seq.generator = torch.Generator(device=self.device).manual_seed(req.params.seed)
        self.inbox.put(seq)
        return seq

    def cancel(self, request_id: str) -> None:
        self.inbox.put(_Cancel(request_id))

    def close(self) -> None:
        self.inbox.put(_STOP)
        self.thread.join(timeout=30)

    def health(self) -> str | None:
        """None while the engine serves; otherwise why it cannot (its thread died, and of what)."""
        if self.thread.is_alive():
            return None
        return thread_death(self.thread) or "the engine thread exited"

    def score(self, token_ids: list[int]) -> torch.Tensor:
        """Teacher-forced logits [T, V] (float32, on CPU), between steps; nothing is cached."""
        with self.lock, torch.inference_mode():
            return self.runner.score(token_ids).cpu()

    # ---- the loop ---------------------------------------------------------------------------
    def _loop(self) -> None:
        sched = self.scheduler
        while True:
            if not self._take_inbox(block=not sched.has_work()):
                return self._shutdown()
            batch = sched.schedule()
            if batch is not None:
                self._step(batch)
            elif sched.waiting:  # nothing runs and the head cannot get its blocks: it never will
                self._finish(sched.waiting[0], "error", "the request does not fit the KV cache pool")
            sched.reap()
            if self.on_step is not None:
                self.on_step()

    def _take_inbox(self, block: bool) -> bool:
        """Apply what was submitted and cancelled since the last step (waiting for the first entry
        when `block`); False once the engine is told to stop."""
        sched = self.scheduler
        try:
            while True:
                item = self.inbox.get(block=block)
                block = False
                if item is _STOP:
                    return False
                if isinstance(item, _Cancel):
                    for seq in sched.find(item.request_id):
                        self._finish(seq, "cancelled")
                else:
                    sched.add(item)
        except queue.Empty:
            return True

    def _shutdown(self) -> None:
        for seq in list(self.scheduler.waiting) + self.scheduler.running:
            self._finish(seq, "cancelled", "engine shut down")
        self.scheduler.reap()
        if self.on_step is not None:
            self.on_step()

    def _step(self, batch: Batch) -> None:
        try:
            with self.lock, torch.inference_mode():
                logits = self.runner.run(batch)
                self.steps += 1
                sampling = [s for s, smp in zip(batch.seqs, batch.samples) if smp]
                if sampling:
                    self._sample_and_emit(sampling, logits)
        except Exception as e:  # fail only these requests; the engine keeps serving
            log.exception("model step failed")
            for s in batch.seqs:
                self._finish(s, "error", f"{'decode' if batch.is_decode else 'prefill'} failed: {type(e).__name__}: {e}")
        if self.step_delay_s:
            time.sleep(self.step_delay_s)

    def _sample_and_emit(self, batch: list[Sequence], logits: torch.Tensor) -> None:
        params = [s.req.params for s in batch]
        for i, s in enumerate(batch):  # stop tokens are suppressed until min_tokens are out
            if len(s.out) < s.req.params.min_tokens and s.req.params.stop_token_ids:
                logits[i, list(s.req.params.stop_token_ids)] = float("-inf")
        if all(p.temperature == 0 for p in params):
            toks = logits.argmax(dim=-1).tolist()
        else:
            dev = logits.device
            toks = sample(
                logits,
                torch.tensor([p.temperature for p in params], device=dev),
                torch.tensor([p.top_k for p in params], device=dev),
                torch.tensor([p.top_p for p in params], device=dev),
                [s.generator for s in batch],
                need_filter=any(p.top_k > 0 or p.top_p < 1 for p in params),
            ).tolist()  # the one host sync per step: stop decisions need the tokens
        now = time.time_ns()
        for s, t in zip(batch, toks):
            s.append(t)
            if s.timing.first_token_ns is None:
                s.timing.first_token_ns = now
            p = s.req.params
            s.sink(Tokens([t]))
            if t in p.stop_token_ids and not p.ignore_eos and len(s.out) >= p.min_tokens:
                self._finish(s, "stop")
            elif len(s.out) >= p.max_new_tokens or s.length >= self.max_len:
                self._finish(s, "length")

    def _finish(self, seq: Sequence, reason: str, error: str | None = None) -> None:
        if seq.done:
            return
        seq.done = True
        seq.timing.finished_ns = time.time_ns()
        self.scheduler.blocks.release(seq)  # before the final event: its blocks are free when the caller hears
        seq.sink(Final(reason, error))
