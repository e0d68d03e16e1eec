"""The API side of an engine that runs in its own process (process.child): the engine interface
(engine.interface.EngineClient) over two pipes (process.messages).

One receiver thread reads the child's messages (one Step per engine step) and hands each request's
items to its sink as the in-process engine would: Tokens, then one Final, with the request's
`SubmittedRequest` (output ids, timing) updated first. The engine-side stamps (first scheduled,
first token, finished, first answer token) travel with the final; `submitted_ns` is stamped here, at the Task call.

If the child dies, every open request gets an `error` final at once and `health()` says why.
"""
from __future__ import annotations

import itertools
import multiprocessing
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from ..api.errors import EngineFailed
from ..api.events import TaskTiming
from ..api.request import GenerationRequest
from ..config import EngineConfig
from ..engine.interface import SubmittedRequest
from ..engine.outputs import Final, Sink, Tokens
from .messages import (Cancel, Closed, Failed, Finished, Loaded, LoadFailed, Score, Scored, Step, Stop,
                       Submit)

STOP_TIMEOUT_S = 30.0


@dataclass(eq=False)
class ScoreCall:
    """A score call waiting for its answer: set `done` once `logits` or `error` is in."""
    done: threading.Event = field(default_factory=threading.Event)
    logits: np.ndarray | None = None
    error: str | None = None


class EngineProxy:
    def __init__(self, load: Callable, bundle_dir: str, cfg: EngineConfig):
        """`load(bundle_dir, cfg)`: a module-level function (pickled by name) that builds the Task in
        the child."""
        self._send_lock = threading.Lock()
        self._seqs: dict[int, SubmittedRequest] = {}
        self._keys = itertools.count()
        self._calls: dict[int, ScoreCall] = {}
        self._failure: str | None = None
        self._closing = False
        self._started, self._start_error = threading.Event(), None
        # The child's death signal follows the thread that started it, so the thread that starts it is
        # the one that reads from it for the proxy's whole life (not, say, a short-lived loading thread).
        self.thread = threading.Thread(target=self._run, args=(load, str(bundle_dir), cfg),
                                       name="qualflow-engine-proxy", daemon=True)
        self.thread.start()
        self._started.wait()
        if self._start_error is not None:
            self.thread.join(timeout=10)
            raise RuntimeError(self._start_error)

    def _run(self, load: Callable, bundle_dir: str, cfg: EngineConfig) -> None:
        try:
            self._start(load, bundle_dir, cfg)
        except BaseException as e:  # noqa: BLE001 - raised by __init__
            self._start_error = str(e) if isinstance(e, RuntimeError) else f"{type(e).__name__}: {e}"
            return
        finally:
            self._started.set()
        self._receive()

    def _start(self, load: Callable, bundle_dir: str, cfg: EngineConfig) -> None:
        from . import child
        ctx = multiprocessing.get_context("spawn")
        child_in, self._to_child = ctx.Pipe(duplex=False)
        self._from_child, child_out = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=child.main, name="qualflow-engine",
                                args=(child_in, child_out, load, bundle_dir, cfg, os.getpid()), daemon=True)
        self.proc.start()
        child_in.close()
        child_out.close()   # ours closed: the child's death reads as EOF
        self.pid = self.proc.pid
        first = self._recv_or_fail("while loading")
        if not isinstance(first, Loaded):   # LoadFailed, or the engine died at once (Failed)
            self.proc.join(timeout=5)
            raise RuntimeError(f"the engine process failed to load: {first.why}")
        self.load_timing, self.info = first.load_timing, first.info

    # ---- the Task's engine interface -----------------------------------------------------------
    def submit(self, req: GenerationRequest, sink: Sink) -> SubmittedRequest:
        seq = SubmittedRequest(req, sink, TaskTiming(submitted_ns=time.time_ns()))
        key = next(self._keys)
        self._seqs[key] = seq
        if not self._send(Submit(key, req, seq.timing.submitted_ns)) or not self.thread.is_alive():
            self._end(key, f"engine failed: {self.health() or 'the engine process is gone'}")
        return seq

    def cancel(self, request_id: str) -> None:
        self._send(Cancel(request_id))

    def score(self, token_ids: list[int]) -> torch.Tensor:
        key, call = next(self._keys), ScoreCall()
        self._calls[key] = call
        if not self._send(Score(key, list(token_ids))):
            self._calls.pop(key, None)
            raise EngineFailed(self.health() or "the engine process is gone")
        call.done.wait()
        if call.error is not None:
            raise EngineFailed(call.error) if self._failure else RuntimeError(call.error)
        return torch.from_numpy(call.logits)

    def health(self) -> str | None:
        if self._failure is not None:
            return self._failure
        if not self.proc.is_alive():
            return self._exit_reason()
        return None

    def close(self) -> None:
        self._closing = True
        if self.proc.is_alive() and self._send(Stop()):
            self.thread.join(timeout=STOP_TIMEOUT_S)
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.thread.join(timeout=5)
        self._to_child.close()

    # ---- internals ----------------------------------------------------------------------------
    def _send(self, msg: Submit | Cancel | Score | Stop) -> bool:
        try:
            with self._send_lock:
                self._to_child.send(msg)
            return True
        except (OSError, ValueError):   # the child is gone (broken pipe) or the proxy is closed
            return False

    def _recv_or_fail(self, when: str) -> Loaded | LoadFailed | Failed:
        try:
            return self._from_child.recv()
        except (EOFError, OSError):
            self.proc.join(timeout=5)
            raise RuntimeError(f"{self._exit_reason()} {when}") from None

    def _exit_reason(self) -> str:
        code = self.proc.exitcode
        if code is None:
            return "the engine process stopped answering"
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return f"the engine process (pid {self.pid}) {how}"

    def _receive(self) -> None:
        """The receiver thread: apply the child's messages until it closes or is gone; then end
        every open request and call."""
        try:
            while True:
                msg = self._from_child.recv()
                if isinstance(msg, Step):
                    self._apply_step(msg)
                elif isinstance(msg, Scored):
                    call = self._calls.pop(msg.call, None)
                    if call is not None:
                        call.logits, call.error = msg.logits, msg.error
                        call.done.set()
                elif isinstance(msg, Failed):
                    self._failure = msg.why
                elif isinstance(msg, Closed):   # let it exit before this thread ends (its death signal follows us)
                    self.proc.join(timeout=STOP_TIMEOUT_S)
                    return
        except (EOFError, OSError):
            pass
        self._end_all()

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
        t.first_scheduled_ns, t.first_token_ns, t.finished_ns = f.first_scheduled_ns, f.first_token_ns, f.finished_ns
        t.answer_first_token_ns = f.answer_first_token_ns

    def _end_all(self) -> None:
        """The child is gone: every open request ends as an error, every waiting score call fails."""
        self.proc.join(timeout=2)
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
