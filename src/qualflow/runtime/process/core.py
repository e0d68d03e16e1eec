"""The engine process (the core) of one API process: `EngineProxy`, the API side that starts it with
multiprocessing spawn and owns it (the engine interface over the link is process.core_client's
EngineLink), and `main`, its entry point. If the engine process dies, every open request gets an
`error` final at once and `health()` says why.

The engine process loads the Task's engine (weights, KV cache, graphs) and owns the device; the
API process keeps validation, prompt rendering and detokenization, so its event loop's work
overlaps the GPU step instead of sharing one GIL with it. The messages are in process.messages.
The engine thread reads the API process's pipe itself (`PipeFeed`, attached as the engine's
feed): a request reaches the scheduler with no other thread's wake-up in between, and an idle
engine waits on the pipe. The main thread only waits for the engine thread to end. The engine
process lives exactly as long as its parent: it is killed when the parent dies (PR_SET_PDEATHSIG,
SIGKILL) and ignores SIGINT and SIGTERM, which reach it too when its process group is signalled,
so a server stopped gracefully closes its engine itself (open requests end as cancelled, not
failed).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import select
import signal
import threading
from collections.abc import Callable

from ...lifetime import die_with_parent
from ..api.events import TaskTiming
from ..config import EngineConfig
from ..engine.outputs import EngineItem, Sink, Tokens
from .core_client import STOP_TIMEOUT_S, EngineLink
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

HEALTH_INTERVAL_S = 0.25


class Outbox:
    """Collects the engine's items per request during a step (engine thread) and sends them as one
    Step at the step's end."""

    def __init__(self, conn):
        self.conn, self.lock = conn, threading.Lock()
        self.tokens: dict[int, list[int]] = {}
        self.finals: list[Finished] = []

    def sink(self, key: int, timing: TaskTiming) -> Sink:
        def put(item: EngineItem) -> None:
            if isinstance(item, Tokens):
                self.tokens.setdefault(key, []).extend(item.ids)
            else:
                self.finals.append(
                    Finished(
                        key,
                        item.reason,
                        item.error,
                        timing.first_scheduled_ns,
                        timing.first_token_ns,
                        timing.finished_ns,
                        timing.answer_first_token_ns,
                        timing.cached_tokens,
                    )
                )

        return put

    def flush(self) -> None:  # engine thread, once per step
        if not self.tokens and not self.finals:
            return
        step = Step(self.tokens, self.finals)
        self.tokens, self.finals = {}, []
        self.send(step)

    def send(self, msg) -> None:
        with self.lock:
            send(self.conn, msg)


def watch_health(engine, out, stopping: threading.Event) -> None:
    """The engine thread died (a fault the step handlers do not catch): say why (`out.send`), and
    end the process."""
    while (why := engine.health()) is None or stopping.is_set():
        if stopping.wait(HEALTH_INTERVAL_S):
            return
    try:
        out.send(Failed(why))
    finally:
        os._exit(1)


def answer_score(engine, out, call: int, token_ids: list[int]) -> None:
    try:
        out.send(Scored(call, engine.score(token_ids).numpy()))
    except Exception as e:  # noqa: BLE001 - the caller raises it
        out.send(Scored(call, None, f"{type(e).__name__}: {e}"))


def become_engine_process(parent_pid: int, cfg: EngineConfig) -> None:
    """Die with the parent, leave SIGINT/SIGTERM to it, and apply the process settings of `cfg`."""
    die_with_parent(signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before the request above took effect
        os._exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    cfg.apply_to_this_process()


def main(
    conn_in, conn_out, load: Callable, bundle_dir: str, cfg: EngineConfig, parent_pid: int
) -> None:
    """`load(bundle_dir, cfg)` builds the Task whose engine this process runs (in this process: the
    child is given `cfg` with engine_process off)."""
    become_engine_process(parent_pid, cfg)
    out = Outbox(conn_out)
    try:
        task = load(bundle_dir, dataclasses.replace(cfg, engine_process="off"))
    except BaseException as e:  # noqa: BLE001 - the parent raises it
        out.send(LoadFailed(f"{type(e).__name__}: {e}"))
        return
    engine = task.engine
    engine.on_step = out.flush
    stopping = threading.Event()
    threading.Thread(
        target=watch_health, args=(engine, out, stopping), name="qualflow-engine-watch", daemon=True
    ).start()
    out.send(Loaded(task.load_timing, task.info))
    _serve(conn_in, engine, out, stopping)


class PipeFeed:
    """The engine's feed (Engine.attach_feed) in this process: applies the parent's messages on the
    engine thread. Non-blocking at a busy step boundary (one poll of the pipe), blocking while the
    engine is idle; the parent gone (EOF) ends the process."""

    def __init__(self, conn_in, engine, out: Outbox, stopping: threading.Event):
        self.conn, self.engine, self.out, self.stopping = conn_in, engine, out, stopping
        self.poller = select.poll()
        self.poller.register(conn_in.fileno(), select.POLLIN)

    def __call__(self, block: bool) -> None:
        if block:
            self._apply(self._recv())  # waits in the read: the GIL is free meanwhile
        while self.poller.poll(0):
            self._apply(self._recv())

    def _recv(self):
        try:
            return recv(self.conn)
        except (EOFError, OSError):  # the parent is gone
            os._exit(0)

    def _apply(self, msg) -> None:
        engine = self.engine
        if isinstance(msg, Submit):
            timing = TaskTiming(submitted_ns=msg.submitted_ns)
            engine.submit(msg.request, self.out.sink(msg.key, timing), timing)
        elif isinstance(msg, Cancel):
            engine.cancel(msg.request_id)
        elif isinstance(msg, Score):
            threading.Thread(
                target=answer_score, args=(engine, self.out, msg.call, msg.token_ids), daemon=True
            ).start()
        elif isinstance(msg, Stop):
            self.stopping.set()
            engine.stop_soon()


def _serve(conn_in, engine, out: Outbox, stopping: threading.Event) -> None:
    """The engine thread applies the parent's messages until Stop; then answer Closed. If the engine
    thread dies of a fault instead, watch_health reports it and ends the process."""
    engine.attach_feed(PipeFeed(conn_in, engine, out, stopping))
    engine.thread.join()
    if stopping.is_set():
        out.send(Closed())
        return
    threading.Event().wait()  # watch_health sends Failed and exits


class EngineProxy(EngineLink):
    def __init__(self, load: Callable, bundle_dir: str, cfg: EngineConfig):
        """`load(bundle_dir, cfg)`: a module-level function (pickled by name) that builds the
        Task in the child."""
        super().__init__()
        self._started, self._start_error = threading.Event(), None
        # The child's death signal follows the thread that started it, so the thread that starts it
        # is the one that reads from it for the proxy's whole life (not, say, a short-lived loading
        # thread).
        self.thread = threading.Thread(
            target=self._run,
            args=(load, str(bundle_dir), cfg),
            name="qualflow-engine-proxy",
            daemon=True,
        )
        self.thread.start()
        self._started.wait()
        if self._start_error is not None:
            self.thread.join(timeout=10)
            raise RuntimeError(self._start_error)

    def _run(self, load: Callable, bundle_dir: str, cfg: EngineConfig) -> None:
        try:
            self._start(load, bundle_dir, cfg)
        except BaseException as e:  # noqa: BLE001 - raised by __init__
            self._start_error = (
                str(e) if isinstance(e, RuntimeError) else f"{type(e).__name__}: {e}"
            )
            return
        finally:
            self._started.set()
        self._receive()

    def _start(self, load: Callable, bundle_dir: str, cfg: EngineConfig) -> None:
        ctx = multiprocessing.get_context("spawn")
        child_in, self._to_engine = ctx.Pipe(duplex=False)
        self._from_engine, child_out = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(
            target=main,
            name="qualflow-engine",
            args=(child_in, child_out, load, bundle_dir, cfg, os.getpid()),
            daemon=True,
        )
        self.proc.start()
        child_in.close()
        child_out.close()  # ours closed: the child's death reads as EOF
        self.pid = self.proc.pid
        first = self._recv_or_fail("while loading")
        if not isinstance(first, Loaded):  # LoadFailed, or the engine died at once (Failed)
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

    def _after_closed(
        self,
    ) -> None:  # let it exit before this thread ends (its death signal follows us)
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
