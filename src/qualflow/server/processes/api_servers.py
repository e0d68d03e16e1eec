"""`qualflow serve --api-server-count N`, N > 1: the serve process binds the socket (serve), then
starts one engine process (runtime EngineHost: the model, or the synthetic engine) and N API
processes (api_process) that all serve that socket, each over its own link to the engine. Admission
is one semaphore of max_batch + max_queue that every API process takes from, so the server admits
what one API process would; every API process appends whole lines to the one timing log.

This process only supervises: SIGTERM or SIGINT stops the API processes (each finishes gracefully
and detaches from the engine, which then closes), then the engine process, and the signal is
re-raised as uvicorn does for one process. An API process that exits on its own (a failed load, a
crash) stops everything, said on stderr, with exit code 2 for an input error (its own 2) and 1
otherwise. The engine process dying is not a stop: each API process answers 503 and fails its
open streams."""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
from multiprocessing.connection import wait

from ..config import EngineConfig, ServerConfig
from .api_process import ApiProcess, main
from .run_app import load_engine_task, say

STOP_TIMEOUT_S = (
    40.0  # an API process's graceful stop: uvicorn's 5 s, then its engine link's up to 30 s
)


def _start(server: ServerConfig, engine: EngineConfig, sock: socket.socket, started_ns: int):
    """The engine process and the API processes, started; (host, processes, the shared semaphores:
    held here while they run, as the processes' spawn arguments are dropped once they started)."""
    from qualflow.runtime import EngineHost

    ctx = multiprocessing.get_context("spawn")
    n, limit = server.api_server_count, engine.max_batch + server.max_queue
    shared = (ctx.Semaphore(limit), ctx.Semaphore(0))  # admission, readiness (peers)
    host = EngineHost(load_engine_task, server.bundle, engine, n)
    procs = []
    for i in range(n):
        me = ApiProcess(i, n, host.links[i], shared[0], limit, shared[1], started_ns, os.getpid())
        procs.append(
            ctx.Process(
                target=main, args=(sock, me, server, engine), name=f"qualflow-api-{i}", daemon=True
            )
        )
        procs[-1].start()
    host.release_links()
    return host, procs, shared


def _terminate(procs, sig: int = signal.SIGTERM) -> None:
    for p in procs:
        if p.exitcode is None:
            try:
                os.kill(p.pid, sig)
            except ProcessLookupError:
                pass


def _supervise(host, procs) -> tuple[int | None, object | None]:
    """Wait until every API process has exited; (the stop signal, the API process that exited on
    its own first), either None."""
    stop: list[int] = []

    def on_signal(sig, frame):
        stop.append(sig)
        _terminate(procs)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    first, engine_seen = None, False
    while any(p.exitcode is None for p in procs):
        watched = [p.sentinel for p in procs if p.exitcode is None]
        wait(watched + ([] if engine_seen else [host.proc.sentinel]), timeout=1.0)
        if not engine_seen and host.proc.exitcode is not None:
            engine_seen = True
            say(f"error: {host.exit_reason()}")
        gone = next((p for p in procs if p.exitcode is not None), None)
        if gone is not None and first is None and not stop:
            first = gone
            say(
                f"error: API process {procs.index(gone)} (pid {gone.pid}) exited with code "
                f"{gone.exitcode}; stopping the server"
            )
            _terminate(procs)
        if stop or first is not None:
            _join(procs)
    return (stop[0] if stop else None), first


def _join(procs) -> None:
    """Wait for the stopping API processes, killing those still there after STOP_TIMEOUT_S."""
    for p in procs:
        p.join(timeout=STOP_TIMEOUT_S)
    _terminate(procs, signal.SIGKILL)
    for p in procs:
        p.join(timeout=5)


def serve_api_processes(
    server: ServerConfig, engine: EngineConfig, sock: socket.socket, started_ns: int
) -> int:
    """Serve until interrupted (re-raising the signal) or until an API process exits on its own
    (returns serve's exit code)."""
    if engine.engine_process == "off":
        say(
            "error: --api-server-count above 1 runs the engine in its own process: "
            "drop --engine-process off"
        )
        return 2
    host, procs, shared = _start(server, engine, sock, started_ns)
    say(
        f"listening on http://{server.host}:{sock.getsockname()[1]} (bundle {server.bundle}, "
        f"device {engine.device}, {len(procs)} API processes {[p.pid for p in procs]}, engine "
        f"process {host.pid})"
    )
    sig, first = _supervise(host, procs)
    host.stop()
    sock.close()
    # the last references: their finalizers unlink the named semaphores (before a re-raised signal)
    del shared
    if sig is not None:
        signal.signal(sig, signal.SIG_DFL)
        signal.raise_signal(sig)
    return 2 if first is not None and first.exitcode == 2 else 1
