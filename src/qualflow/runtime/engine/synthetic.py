"""SyntheticEngine: an engine with no model, for measuring the serving path's own ceiling. It keeps
the engine interface (engine.interface.EngineClient), so the Task's validation, the tokenizer, the
detokenizer, the HTTP path, the timing records and the accounting are the real ones; only the
forward pass is gone.

One thread ticks a fixed step clock (`step_s`): each tick admits waiting requests up to the batch
(oldest first) and gives every running request one token, the first one in the tick that admits
it. A request runs to its max_new_tokens (finish reason `length`): the tokens cycle through
`token_ids`, which hold no stop token, so stop tokens and min_tokens never decide. A tick that
runs late (a busy machine wakes the thread late) moves the clock: the next tick comes a step after
it, never sooner, so a token gap is never shorter than a step and the engine never bursts to
catch up. `on_step`, when set, is called on the engine thread after each tick, as engine.Engine's
is after each step (the engine process sends each step's items from it). A request with thinking
on gets its think block closed by the forced closing tokens at its budget (engine.thinking), as in
the real engine. `attach_feed` / `stop_soon` are engine.Engine's, for the engine process: the feed
is polled (never waited on) at every tick, before the tick admits."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from ..api.events import TaskTiming
from ..api.request import GenerationRequest
from .interface import SubmittedRequest
from .outputs import Final, Sink, Tokens
from .thinking import ThinkState, ThinkTokens
from .threads import thread_death


class SyntheticEngine:
    def __init__(
        self,
        step_s: float,
        max_batch: int,
        token_ids: list[int],
        think_tokens: ThinkTokens | None = None,
    ):
        if step_s <= 0 or not token_ids:
            raise ValueError("the synthetic engine needs a positive step and at least one token id")
        self.step_s, self.max_batch, self.token_ids = step_s, max_batch, list(token_ids)
        self.think_tokens = think_tokens
        self._think: dict[
            SubmittedRequest, ThinkState
        ] = {}  # requests with thinking on (their think block)
        self._lock = threading.Lock()
        self._waiting: deque[SubmittedRequest] = deque()
        self._running: list[SubmittedRequest] = []
        self._cancelled: set[str] = set()
        self._stop = threading.Event()
        self.on_step: Callable[[], None] | None = None
        self.feed: Callable[[bool], None] | None = None
        self.thread = threading.Thread(
            target=self._loop, name="qualflow-synthetic-engine", daemon=True
        )
        self.thread.start()

    # ---- EngineClient ---------------------------------------------------------------------------
    def submit(
        self, req: GenerationRequest, sink: Sink, timing: TaskTiming | None = None
    ) -> SubmittedRequest:
        """`timing`: stamps begun elsewhere (the engine process gets the caller's submission
        time)."""
        seq = SubmittedRequest(req, sink, timing or TaskTiming(submitted_ns=time.time_ns()))
        with self._lock:
            if req.thinking is not None and self.think_tokens is not None:
                self._think[seq] = ThinkState.of(self.think_tokens, req.thinking.budget)
            self._waiting.append(seq)
        return seq

    def cancel(self, request_id: str) -> None:
        with self._lock:
            self._cancelled.add(request_id)

    def score(self, token_ids: list[int]):
        raise RuntimeError("the synthetic engine has no model: it cannot score")

    def health(self) -> str | None:
        if self.thread.is_alive():
            return None
        return thread_death(self.thread) or "the synthetic engine thread exited"

    def attach_feed(self, feed: Callable[[bool], None]) -> None:
        self.feed = feed

    def stop_soon(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._stop.set()
        self.thread.join(timeout=30)
        with self._lock:
            open_seqs = [*self._running, *self._waiting]
            self._running, self._waiting = [], deque()
        for seq in open_seqs:
            self._finish(seq, "cancelled")

    # ---- the step clock -------------------------------------------------------------------------
    def _loop(self) -> None:
        next_tick = time.monotonic() + self.step_s
        while not self._stop.is_set():
            delay = next_tick - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            next_tick = max(next_tick, time.monotonic()) + self.step_s
            if self.feed is not None:
                self.feed(False)
            self._step()
            if self.on_step is not None:
                self.on_step()

    def _step(self) -> None:
        with self._lock:
            cancelled, self._cancelled = self._cancelled, set()
            while self._waiting and len(self._running) < self.max_batch:
                seq = self._waiting.popleft()
                seq.timing.first_scheduled_ns = time.time_ns()
                self._running.append(seq)
            gone = [s for s in [*self._running, *self._waiting] if s.req.request_id in cancelled]
            for seq in gone:
                (self._running if seq in self._running else self._waiting).remove(seq)
            running = list(self._running)
        for seq in gone:
            self._finish(seq, "cancelled")
        ended = []
        for seq in running:
            token = self.token_ids[len(seq.out) % len(self.token_ids)]
            think = self._think.get(seq) if self._think else None
            if think is not None:
                forced = think.forced(len(seq.out))
                token = token if forced is None else forced
                if think.read(len(seq.out), token):
                    seq.timing.answer_first_token_ns = time.time_ns()
            seq.out.append(token)
            if seq.timing.first_token_ns is None:
                seq.timing.first_token_ns = time.time_ns()
            seq.sink(Tokens([token]))
            if len(seq.out) >= seq.req.params.max_new_tokens:
                ended.append(seq)
        if ended:
            with self._lock:
                self._running = [s for s in self._running if s not in ended]
            for seq in ended:
                self._finish(seq, "length")

    def _finish(self, seq: SubmittedRequest, reason: str) -> None:
        if seq.done:
            return
        self._think.pop(seq, None)
        seq.done = True
        seq.timing.finished_ns = time.time_ns()
        seq.sink(Final(reason))
