"""The engine: one thread owns the model and runs continuous batching over a paged KV cache.

At every step boundary:
  1. take new submissions and cancellations from the inbox (thread-safe, FIFO);
  2. the scheduler picks the step's tokens under its token budget (decodes, prefill chunks) and
     the blocks they need, preempting the newest sequence if the pool is full;
  3. the model runner runs them as one packed forward (a captured graph for decode-only steps) and
     the tokens are sampled on the device, then copied to the host without waiting;
  4. the sampled tokens are read back, emitted and stop-checked, and the blocks of finished
     sequences are freed (nothing is copied).

With `async_scheduling`, step 4 of step n runs after step n+1 is launched, so the host schedules
and builds step n+1 while the device runs step n. Step n+1's inputs take step n's tokens from the
device (a placeholder stands for them on the host), a stop is seen one step late, and the token a
stopped (or cancelled) sequence got in that overlapped step is discarded: never delivered, never
counted. A sequence whose last token (max_new_tokens, the context limit) is sampled is not
scheduled again, so only stops cost the extra step. The freed blocks of a sequence whose extra step
is still running are safe to reuse: later steps run after it on the same device stream.
Without it, step 4 follows step 3 at once: the same code, one step at a time.

Thinking requests go through `ThinkSteps` (engine.think_steps), constrained ones through
`GrammarSteps` (engine.grammar_steps). Delivery goes through each request's `sink`
(engine.outputs): Tokens as sampled, then one Final. `on_step` runs on the engine thread after each
iteration. `feed` (`attach_feed`), called at every step boundary, moves what arrived (an engine
process's pipe) into the inbox on this thread, waiting when the engine is idle.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..api.events import TaskTiming
from ..api.request import GenerationRequest
from .grammar_steps import COMPILE_POLL_S, GrammarSteps, Refused, attach_grammar
from .inflight import InFlight
from .model_runner import ModelRunner
from .outputs import Final, Sink, Tokens
from .sampling import sample, suppress
from .scheduler import Batch, Scheduler
from .sequence import PLACEHOLDER, Sequence
from .spec import EngineSpec
from .think_steps import ThinkSteps
from .threads import thread_death

log = logging.getLogger("qualflow.engine")
_STOP = object()
_WAKE = object()  # an inbox entry that only ends a blocking wait (attach_feed)


@dataclass(frozen=True, slots=True)
class _Cancel:
    """An inbox entry: end the request of this id (a submission is its Sequence itself)."""

    request_id: str


class Engine:
    def __init__(self, spec: EngineSpec, runner: ModelRunner, scheduler: Scheduler):
        self.spec, self.runner, self.scheduler = spec, runner, scheduler
        self.device, self.max_len = spec.device, spec.max_len
        self.think = ThinkSteps(spec.think_tokens, scheduler.held)
        self.grammar: GrammarSteps | None = None  # constrained decoding, set by the loader
        self.async_scheduling = spec.async_scheduling  # launch step n+1 before step n's read-back
        self.step_delay_s = spec.cfg.step_delay_s  # test-only slowdown, 0 in production
        self.lock = threading.Lock()  # held while the model runs
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.steps = 0
        self.on_step: Callable[[], None] | None = None
        self.feed: Callable[[bool], None] | None = None
        self.thread = threading.Thread(target=self._loop, name="qualflow-engine", daemon=True)
        self.thread.start()

    @property
    def waiting(self) -> list[Sequence]:
        return list(self.scheduler.waiting)

    @property
    def running(self) -> list[Sequence]:
        return [s for s in self.scheduler.running if not s.done]

    # ---- called from any thread -------------------------------------------------------------
    def submit(
        self, req: GenerationRequest, sink: Sink, timing: TaskTiming | None = None
    ) -> Sequence:
        """`timing`: stamps begun elsewhere (the engine process gets the caller's submission
        time)."""
        seq = Sequence(
            req, sink, timing or TaskTiming(submitted_ns=time.time_ns()), max_len=self.max_len
        )
        if req.params.seed is not None:
            seq.generator = torch.Generator(device=self.device).manual_seed(req.params.seed)
        if req.thinking is not None:
            seq.think = self.think.state(req.thinking.budget)
        if req.grammar is not None:  # into the inbox once it has its matcher (or a Refused)
            attach_grammar(self.grammar, seq, self.inbox.put)
        else:
            self.inbox.put(seq)
        return seq

    def cancel(self, request_id: str) -> None:
        self.inbox.put(_Cancel(request_id))

    def close(self) -> None:
        self.stop_soon()
        self.thread.join(timeout=30)
        if self.grammar is not None:
            self.grammar.close()

    def stop_soon(self) -> None:
        """Shut the loop down at its next step boundary (from any thread, the engine's too)."""
        self.inbox.put(_STOP)

    def attach_feed(self, feed: Callable[[bool], None]) -> None:
        """From now on the engine thread calls `feed(block)` at each step boundary: it puts what
        arrived into the inbox (`submit`, `cancel`, `stop_soon` on this thread) and, when
        `block`, returns only once something did. Called once, from another thread, before any
        work is submitted."""
        self.feed = feed
        self.inbox.put(_WAKE)  # the loop waits on the inbox alone until it sees this

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
        flight: InFlight | None = None  # the launched step whose tokens are not read back yet
        while self._take_inbox(block=flight is None and not self.scheduler.has_work()):
            flight = self._step(flight)
            if self.on_step is not None:
                self.on_step()
        self._shutdown()

    def _step(self, flight: InFlight | None) -> InFlight | None:
        """One step: schedule, launch, read back the step before (overlapped) or this one; the
        launched step still to read back."""
        sched = self.scheduler
        batch = sched.schedule()
        launched = self._launch(batch, flight) if batch is not None else None
        if flight is not None:  # overlapped: step n's tokens are read while step n+1 runs
            self._resolve(flight)
        elif batch is None and sched.waiting:  # nothing runs or will finish: the head never fits
            self._finish(sched.waiting[0], "error", "the request does not fit the KV cache pool")
        if launched is not None and not self.async_scheduling:
            self._resolve(launched)
            launched = None
        sched.reap()
        return launched

    def _take_inbox(self, block: bool) -> bool:
        """Apply what was submitted and cancelled since the last step (waiting for the first entry
        when `block`); False once the engine is told to stop."""
        sched, timeout = self.scheduler, None
        if self.feed is not None:  # while a grammar compiles, its sequence comes by the inbox
            compiling = block and self.grammar is not None and self.grammar.busy()
            self.feed(block and not compiling)
            block, timeout = compiling, COMPILE_POLL_S if compiling else None
        try:
            while True:
                item = self.inbox.get(block=block, timeout=timeout)
                block = False
                if item is _STOP:
                    return False
                if item is _WAKE:
                    continue
                if isinstance(item, _Cancel):
                    compiling = self.grammar.compiling(item.request_id) if self.grammar else []
                    for seq in sched.find(item.request_id) + compiling:
                        self._finish(seq, "cancelled")
                elif isinstance(item, Refused):
                    self._finish(item.seq, "error", item.why)
                elif item.req.grammar is None or self.grammar.take(item):
                    sched.add(item)
                    self.think.add(item)
        except queue.Empty:
            return True

    def _shutdown(self) -> None:
        for seq in list(self.scheduler.waiting) + self.scheduler.running:
            self._finish(seq, "cancelled", "engine shut down")
        self.scheduler.reap()
        if self.on_step is not None:
            self.on_step()

    def _launch(self, batch: Batch, flight: InFlight | None) -> InFlight | None:
        """Queue one model step and its sampling on the device, and the copy of the sampled tokens
        to the host; nothing here waits for the device. The sampling sequences get a placeholder
        token each (Sequence.PLACEHOLDER); the next step takes its value from this step's tokens."""
        try:
            with self.lock, torch.inference_mode():
                logits = self.runner.run(batch, None if flight is None else flight.device_tokens)
                self.steps += 1
                sampling = [s for s, smp in zip(batch.seqs, batch.samples) if smp]
                if not sampling:
                    return None
                toks = self._sample(sampling, logits, flight)
                thinking = self.think.launch(sampling, toks)
                host, ready = toks, None
                if toks.device.type == "cuda":
                    host = torch.empty(toks.shape, dtype=toks.dtype, pin_memory=True)
                    host.copy_(toks, non_blocking=True)
                    ready = torch.cuda.Event()
                    ready.record()
            for row, s in enumerate(sampling):
                s.token_ids.append(PLACEHOLDER)
                s.pending = (self.steps, row)
            self.think.hold(sampling, thinking)
            return InFlight(self.steps, sampling, toks, host, ready, thinking)
        except Exception as e:  # fail only these requests; the engine keeps serving
            log.exception("model step failed")
            kind = "decode" if batch.is_decode else "prefill"
            for s in batch.seqs:
                self._finish(s, "error", f"{kind} failed: {type(e).__name__}: {e}")
            return None
        finally:
            if self.step_delay_s:
                time.sleep(self.step_delay_s)

    def _sample(
        self, batch: list[Sequence], logits: torch.Tensor, flight: InFlight | None = None
    ) -> torch.Tensor:
        """The next token of each sequence, on the device (no host sync but a constrained row's
        wait for `flight`, the step before, which it needs: GrammarSteps.mask)."""
        params = [s.req.params for s in batch]
        rows = [
            i
            for i, (s, p) in enumerate(zip(batch, params))
            if s.sampled < p.min_tokens and p.stop_token_ids
        ]
        if rows:  # stop tokens are suppressed until min_tokens are out
            suppress(logits, rows, [params[i].stop_token_ids for i in rows])
        if self.grammar is not None:
            self.grammar.mask(batch, logits, flight)
        if all(p.temperature == 0 for p in params):
            return logits.argmax(dim=-1)
        return sample(logits, params, [s.generator for s in batch])

    def _resolve(self, flight: InFlight) -> None:
        """Read a launched step's tokens back (waiting for that step only), deliver them and apply
        the stop checks. A sequence that ended meanwhile (it stopped at the step before, or was
        cancelled) gets nothing: the token its overlapped step produced is discarded."""
        try:
            if flight.ready is not None:
                flight.ready.synchronize()
            toks = flight.host_tokens.tolist()
        except Exception as e:  # noqa: BLE001 - the device failed this step
            log.exception("model step failed")
            for s in flight.seqs:
                self._finish(s, "error", f"step failed: {type(e).__name__}: {e}")
            return
        now = time.time_ns()
        self.think.read(flight.seqs, flight.thinking, toks, now)
        for row, (s, t) in enumerate(zip(flight.seqs, toks)):
            if s.pending == (flight.step, row):
                s.pending = None
            if s.done:
                continue
            s.resolve(t)
            if s.timing.first_token_ns is None:
                s.timing.first_token_ns = now
            p = s.req.params
            s.sink(Tokens([t]))
            if t in p.stop_token_ids and not p.ignore_eos and len(s.out) >= p.min_tokens:
                self._finish(s, "stop")
            elif (
                len(s.out) >= p.max_new_tokens
                or len(s.req.prompt_token_ids) + len(s.out) >= self.max_len
            ):
                self._finish(s, "length")

    def _finish(self, seq: Sequence, reason: str, error: str | None = None) -> None:
        if seq.done:
            return
        seq.done = True
        seq.timing.finished_ns = time.time_ns()
        del seq.token_ids[
            len(seq.req.prompt_token_ids) + len(seq.out) :
        ]  # a token still in flight is not its
        seq.pending = None
        self.think.drop(seq)
        if seq.grammar is not None:
            self.grammar.drop(seq)
        # before the final event: its blocks are free when the caller hears; after a failed step
        # its K/V may be wrong, so its blocks leave the prefix cache
        self.scheduler.blocks.release(seq, keep=reason != "error")
        seq.sink(Final(reason, error))
