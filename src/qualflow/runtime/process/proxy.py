"""The API side of an engine that runs in its own child process (process.child), started and owned
by this proxy: one API process (`qualflow serve` with one API server). The link itself, the engine
interface over the two pipes, is process.link.EngineLink.

If the child dies, every open request gets an `error` final at once and `health()` says why.
"""
from __future__ import annotations

import multiprocessing
import os
import threading
from typing import Callable

from ..config import EngineConfig
from .link import STOP_TIMEOUT_S, EngineLink
from .messages import Failed, Loaded, LoadFailed, Stop, recv


class EngineProxy(EngineLink):
    def __init__(self, load: Callable, bundle_dir: str, cfg: EngineConfig):
        """`load(bundle_dir, cfg)`: a module-level function (pickled by name) that builds the Task in
        the child."""
        super().__init__()
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
        child_in, self._to_engine = ctx.Pipe(duplex=False)
        self._from_engine, child_out = ctx.Pipe(duplex=False)
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
        self._begin_reading()

    def close(self) -> None:
        self._closing = True
        self._stop_reading()
        if self.proc.is_alive() and self._send(Stop()):
            self.thread.join(timeout=STOP_TIMEOUT_S)
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.thread.join(timeout=5)
        self._to_engine.close()

    # ---- what the link asks of its engine process ----------------------------------------------
    def _alive(self) -> bool:
        return self.proc.is_alive()

    def _after_closed(self) -> None:   # let it exit before this thread ends (its death signal follows us)
        self.proc.join(timeout=STOP_TIMEOUT_S)

    def _settle(self) -> None:
        self.proc.join(timeout=2)

    def _recv_or_fail(self, when: str) -> Loaded | LoadFailed | Failed:
        try:
            return recv(self._from_engine)
        except (EOFError, OSError):
            self.proc.join(timeout=5)
            raise RuntimeError(f"{self._exit_reason()} {when}") from None

    def _exit_reason(self) -> str:
        code = self.proc.exitcode
        if code is None:
            return "the engine process stopped answering"
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return f"the engine process (pid {self.pid}) {how}"
