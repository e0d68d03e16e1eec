"""The API side of an engine that runs in its own process (engine_process.py): the interface the Task
uses of an in-process Engine (submit / cancel / score / close / health), over two pipes.

One receiver thread reads the child's messages (one per engine step) and hands each request's items to
its sink as the in-process engine would: ("tokens", ids), then one ("final", reason, error), with the
request's `RemoteSeq` (output ids, timing) updated first. The engine-side stamps (first scheduled,
first token, finished) travel with the final; `submitted_ns` is stamped here, at the Task call.

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

import torch

from .errors import EngineFailed
from .events import TaskTiming
from .request import GenerationRequest

STOP_TIMEOUT_S = 30.0


@dataclass(eq=False)
class RemoteSeq:
    """What a Task caller reads of a request whose engine runs elsewhere (the fields Collector uses)."""
    req: GenerationRequest
    sink: Callable[[tuple], None]
    timing: TaskTiming
    out: list[int] = field(default_factory=list)
    done: bool = False


class EngineProxy:
    def __init__(self, load: Callable, bundle_dir: str, options: dict):
        """`load(bundle_dir, **options)`: a module-level function (pickled by name) that builds the
        Task in the child."""
        self._send_lock = threading.Lock()
        self._seqs: dict[int, RemoteSeq] = {}
        self._keys = itertools.count()
        self._calls: dict[int, list] = {}
        self._failure: str | None = None
        self._closing = False
        self._started, self._start_error = threading.Event(), None
        # The child's death signal follows the thread that started it, so the thread that starts it is
        # the one that reads from it for the proxy's whole life (not, say, a short-lived loading thread).
        self.thread = threading.Thread(target=self._run, args=(load, str(bundle_dir), options),
                                       name="qualflow-engine-proxy", daemon=True)
        self.thread.start()
        self._started.wait()
        if self._start_error is not None:
            self.thread.join(timeout=10)
            raise RuntimeError(self._start_error)

    def _run(self, load: Callable, bundle_dir: str, options: dict) -> None:
        try:
            self._start(load, bundle_dir, options)
        except BaseException as e:  # noqa: BLE001 - raised by __init__
            self._start_error = str(e) if isinstance(e, RuntimeError) else f"{type(e).__name__}: {e}"
            return
        finally:
            self._started.set()
        self._receive()

    def _start(self, load: Callable, bundle_dir: str, options: dict) -> None:
        from . import engine_process
        ctx = multiprocessing.get_context("spawn")
        child_in, self._to_child = ctx.Pipe(duplex=False)
        self._from_child, child_out = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=engine_process.main, name="qualflow-engine",
                                args=(child_in, child_out, load, bundle_dir, options, os.getpid()), daemon=True)
        self.proc.start()
        child_in.close()
        child_out.close()   # ours closed: the child's death reads as EOF
        self.pid = self.proc.pid
        first = self._recv_or_fail("while loading")
        if first[0] != "ready":
            self.proc.join(timeout=5)
            raise RuntimeError(f"the engine process failed to load: {first[1]}")
        _, self.load_timing, self.info = first

    # ---- the Task's engine interface -----------------------------------------------------------
    def submit(self, req: GenerationRequest, sink: Callable[[tuple], None]) -> RemoteSeq:
        seq = RemoteSeq(req, sink, TaskTiming(submitted_ns=time.time_ns()))
        key = next(self._keys)
        self._seqs[key] = seq
        if not self._send(("submit", key, req, seq.timing.submitted_ns)) or not self.thread.is_alive():
            self._end(key, f"engine failed: {self.health() or 'the engine process is gone'}")
        return seq

    def cancel(self, request_id: str) -> None:
        self._send(("cancel", request_id))

    def score(self, token_ids: list[int]) -> torch.Tensor:
        call, done = next(self._keys), threading.Event()
        self._calls[call] = slot = [done, None, None]
        if not self._send(("score", call, list(token_ids))):
            self._calls.pop(call, None)
            raise EngineFailed(self.health() or "the engine process is gone")
        done.wait()
        if slot[2] is not None:
            raise EngineFailed(slot[2]) if self._failure else RuntimeError(slot[2])
        return torch.from_numpy(slot[1])

    def health(self) -> str | None:
        if self._failure is not None:
            return self._failure
        if not self.proc.is_alive():
            return self._exit_reason()
        return None

    def close(self) -> None:
        self._closing = True
        if self.proc.is_alive() and self._send(("stop",)):
            self.thread.join(timeout=STOP_TIMEOUT_S)
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.thread.join(timeout=5)
        self._to_child.close()

    # ---- internals ----------------------------------------------------------------------------
    def _send(self, msg: tuple) -> bool:
        try:
            with self._send_lock:
                self._to_child.send(msg)
            return True
        except (OSError, ValueError):   # the child is gone (broken pipe) or the proxy is closed
            return False

    def _recv_or_fail(self, when: str) -> tuple:
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
        seqs = self._seqs
        try:
            while True:
                msg = self._from_child.recv()
                kind = msg[0]
                if kind == "step":
                    for key, ids in msg[1]:
                        s = seqs.get(key)
                        if s is not None:
                            s.out.extend(ids)
                            s.sink(("tokens", ids))
                    for key, reason, error, scheduled, first, finished in msg[2]:
                        s = seqs.pop(key, None)
                        if s is not None:
                            t = s.timing
                            t.first_scheduled_ns, t.first_token_ns, t.finished_ns = scheduled, first, finished
                            s.done = True
                            s.sink(("final", reason, error))
                elif kind == "score":
                    slot = self._calls.pop(msg[1], None)
                    if slot is not None:
                        slot[1], slot[2] = msg[2], msg[3]
                        slot[0].set()
                elif kind == "failed":
                    self._failure = msg[1]
                elif kind == "closed":   # let it exit before this thread ends (its death signal follows us)
                    self.proc.join(timeout=STOP_TIMEOUT_S)
                    return
        except (EOFError, OSError):
            pass
        self.proc.join(timeout=2)
        if not self._closing or seqs:
            self._failure = self._failure or self._exit_reason()
        why = f"engine failed: {self._failure or 'the engine process is gone'}"
        for key in list(seqs):
            self._end(key, why)
        for call in list(self._calls):
            slot = self._calls.pop(call)
            slot[2] = why
            slot[0].set()

    def _end(self, key: int, error: str) -> None:
        s = self._seqs.pop(key, None)
        if s is not None and not s.done:
            s.done = True
            s.timing.finished_ns = time.time_ns()
            s.sink(("final", "error", error))
