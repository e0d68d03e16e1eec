"""The API side of one link to an engine in another process: the engine interface
(engine.interface.EngineClient) over two one-way pipes (process.messages). `EngineLink` is what
both API-side kinds share: `core.EngineProxy`, which starts and owns its engine process (one API
process), and `AttachedEngine` here, one of several API processes' links to an engine process
started by `core_hub.EngineHost` (`qualflow serve --api-server-count N`). A receiver thread reads
the engine's messages (one Step per engine step) until the asyncio loop that streams the requests
asks for them (`read_on`; process.reading): that loop then reads the pipe itself, one wake-up a
step instead of the thread's and then the loop's. Either hands each request's items to its sink
as the in-process engine would: Tokens, then one Final, with the request's `SubmittedRequest`
(output ids, timing) updated first. The engine-side stamps (first scheduled, first token,
finished, first answer token) travel with the final; `submitted_ns` is stamped here, at the Task
call. When the link breaks (the engine process died), every open request gets an `error` final at
once and `health()` says why.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..api.errors import EngineFailed
from ..api.events import TaskTiming
from ..api.request import GenerationRequest
from ..engine.interface import SubmittedRequest
from ..engine.outputs import Final, Sink, Tokens
from .messages import (
    Cancel,
    Closed,
    Failed,
    Finished,
    Loaded,
    LoadFailed,
    Score,
    Scored,
    Step,
    Stop,
    Submit,
    recv,
    send,
)
from .reading import PipeReading

if TYPE_CHECKING:  # numpy and torch are imported by a score, so that core_hub's parent stays light
    import numpy as np
    import torch

    from .messages import LinkEnds

STOP_TIMEOUT_S = 30.0


@dataclass(eq=False)
class ScoreCall:
    """A score call waiting for its answer: set `done` once `logits` or `error` is in."""

    done: threading.Event = field(default_factory=threading.Event)
    logits: np.ndarray | None = None
    error: str | None = None


class EngineLink:
    """The engine interface over `_to_engine` / `_from_engine` (set by the subclass before its
    receiver thread runs `_receive`). Subclasses say whether the engine is still there (`_alive`),
    why not (`_exit_reason`) and what to wait for once it answered Closed (`_after_closed`)."""

    def __init__(self):
        self._send_lock = threading.Lock()
        self._seqs: dict[int, SubmittedRequest] = {}
        self._keys = itertools.count()
        self._calls: dict[int, ScoreCall] = {}
        self._failure: str | None = None
        self._closing = False
        self._reading: PipeReading | None = None  # set once `_from_engine` is (`_begin_reading`)

    # ---- what the kinds of link say about their engine process ---------------------------------
    def _alive(self) -> bool:
        raise NotImplementedError

    def _exit_reason(self) -> str:
        raise NotImplementedError

    def _after_closed(self) -> None:
        """The engine answered Closed (on the receiver thread)."""

    def _settle(self) -> None:
        """The link broke (on the receiver thread): let the engine's exit be seen, if it can be."""

    # ---- the Task's engine interface -----------------------------------------------------------
    def read_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Let `loop` (the caller's, from its thread) read the engine's messages itself."""
        if self._reading is not None:
            self._reading.read_on(loop)

    def submit(self, req: GenerationRequest, sink: Sink) -> SubmittedRequest:
        if self._reading is not None:
            self._reading.ensure_live()
        seq = SubmittedRequest(req, sink, TaskTiming(submitted_ns=time.time_ns()))
        key = next(self._keys)
        self._seqs[key] = seq
        if not self._send(Submit(key, req, seq.timing.submitted_ns)) or not self.thread.is_alive():
            self._end(key, f"engine failed: {self.health() or 'the engine process is gone'}")
        return seq

    def cancel(self, request_id: str) -> None:
        self._send(Cancel(request_id))

    def before_blocking_wait(self) -> None:
        """A caller is about to block until the engine answers: if it is the loop that reads the
        pipe, the receiver thread takes the pipe back (the loop would wait on its own reader)."""
        if self._reading is not None and self._reading.on_loop_thread():
            self._reading.take_back()

    def score(self, token_ids: list[int]) -> torch.Tensor:
        self.before_blocking_wait()
        key, call = next(self._keys), ScoreCall()
        self._calls[key] = call
        if not self._send(Score(key, list(token_ids))):
            self._calls.pop(key, None)
            raise EngineFailed(self.health() or "the engine process is gone")
        call.done.wait()
        if call.error is not None:
            raise EngineFailed(call.error) if self._failure else RuntimeError(call.error)
        import torch

        return torch.from_numpy(call.logits)

    def health(self) -> str | None:
        if self._failure is not None:
            return self._failure
        if not self._alive():
            return self._exit_reason()
        return None

    # ---- internals ----------------------------------------------------------------------------
    def _send(self, msg: Submit | Cancel | Score | Stop) -> bool:
        try:
            with self._send_lock:
                send(self._to_engine, msg)
            return True
        except (OSError, ValueError):  # the engine is gone (broken pipe) or the link is closed
            return False

    def _begin_reading(self) -> None:
        """`_from_engine` is set: its reading may move to a loop from now on."""
        self._reading = PipeReading(self._from_engine, self._handle)

    def _stop_reading(self) -> None:
        """Before Stop: the receiver thread reads the answer."""
        if self._reading is not None:
            self._reading.take_back(closing=True)

    def _receive(self) -> None:
        """The receiver thread: apply the engine's messages (or wait while a loop does) until it
        closes or is gone; then end every open request and call."""
        try:
            self._reading.run()
            self._after_closed()
            return
        except (EOFError, OSError):
            pass
        finally:
            self._reading.close()
        self._end_all()

    def _handle(self, msg) -> bool:
        """Apply one message (on whichever thread reads); True once the engine answered Closed."""
        if isinstance(msg, Step):
            self._apply_step(msg)
        elif isinstance(msg, Scored):
            call = self._calls.pop(msg.call, None)
            if call is not None:
                call.logits, call.error = msg.logits, msg.error
                call.done.set()
        elif isinstance(msg, Failed):
            self._failure = msg.why
        return isinstance(msg, Closed)

    def _apply_step(self, step: Step) -> None:
        seqs = self._seqs
        for key, ids in step.tokens.items():
            s = seqs.get(key)
            if s is not None:
                s.out.extend(ids)
                s.sink(Tokens(ids))
        for f in step.finals:
            s = seqs.pop(f.key, None)
            if s is not None:
                self._stamp(s.timing, f)
                s.done = True
                s.sink(Final(f.reason, f.error))

    @staticmethod
    def _stamp(t: TaskTiming, f: Finished) -> None:
        t.first_scheduled_ns, t.first_token_ns, t.finished_ns = (
            f.first_scheduled_ns,
            f.first_token_ns,
            f.finished_ns,
        )
        t.answer_first_token_ns, t.cached_tokens = f.answer_first_token_ns, f.cached_tokens

    def _end_all(self) -> None:
        """The engine is gone: every open request ends as an error, every waiting score call
        fails."""
        self._settle()
        if not self._closing or self._seqs:
            self._failure = self._failure or self._exit_reason()
        why = f"engine failed: {self._failure or 'the engine process is gone'}"
        for key in list(self._seqs):
            self._end(key, why)
        for key in list(self._calls):
            call = self._calls.pop(key)
            call.error = why
            call.done.set()

    def _end(self, key: int, error: str) -> None:
        s = self._seqs.pop(key, None)
        if s is not None and not s.done:
            s.done = True
            s.timing.finished_ns = time.time_ns()
            s.sink(Final("error", error))


class AttachedEngine(EngineLink):
    """One API process's link to an engine process it shares with the other API processes of the
    server (core_hub.EngineHost starts it, core_hub.main runs it). Built once the engine
    answered: raises RuntimeError if it failed to load (ValueError for an input error: a missing
    or tampered bundle). `close` detaches this API process: its open requests end as cancelled;
    the engine goes on for the others, and ends once every API process has detached."""

    def __init__(self, ends: LinkEnds):
        super().__init__()
        self._to_engine, self._from_engine, self.pid = (
            ends.to_engine,
            ends.from_engine,
            ends.engine_pid,
        )
        self._broken = False
        try:
            first = recv(self._from_engine)
        except (EOFError, OSError):
            raise RuntimeError(
                f"the engine process (pid {self.pid}) exited while loading"
            ) from None
        if isinstance(first, LoadFailed):
            raise (ValueError if first.input_error else RuntimeError)(
                f"the engine process failed to load: {first.why}"
            )
        if not isinstance(first, Loaded):  # Failed: the engine died at once
            raise RuntimeError(f"the engine process failed to load: {first.why}")
        self.load_timing, self.info = first.load_timing, first.info
        self._begin_reading()
        self.thread = threading.Thread(
            target=self._receive, name="qualflow-engine-link", daemon=True
        )
        self.thread.start()

    def _alive(self) -> bool:
        return not self._broken

    def _exit_reason(self) -> str:
        return f"the engine process (pid {self.pid}) is gone (its link to this API process closed)"

    def _settle(self) -> None:
        self._broken = True

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._stop_reading()
        if self._send(Stop()):
            self.thread.join(timeout=STOP_TIMEOUT_S)
        self._to_engine.close()
