"""`qualflow serve`: one process serving one bundle. Its flags are generated from ServerConfig and the
runtime's EngineConfig; `serve(server, engine)` binds the port before anything loads, then runs the
app under uvicorn while the Task loads on a thread."""
from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any

from qualflow.configs import add_arguments, from_args

from .config import EngineConfig, ServerConfig
from .listen import PortBusy, bind

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _say(message: str) -> None:
    print(f"qualflow serve: {message}", file=sys.stderr, flush=True)


def load_engine_task(bundle: str, engine: EngineConfig) -> Any:
    """The Task `qualflow serve` runs: `load_task(bundle, engine)`, the runtime's agreed signature."""
    from qualflow.runtime import load_task
    return load_task(bundle, engine)


def _tune_process(engine: EngineConfig) -> None:
    """Process-wide knobs, set before the Task loads."""
    if engine.gil_switch_ms:   # the engine thread gets the GIL back sooner after its GPU wait
        sys.setswitchinterval(engine.gil_switch_ms / 1000)
    if engine.cpu_threads:   # intra-op threads; on a box shared with the load generator, fewer spin less
        import torch
        torch.set_num_threads(engine.cpu_threads)


def serve(server: ServerConfig, engine: EngineConfig) -> int:
    """Run the server until interrupted. Returns the process exit code: 2 for a busy port or bad input
    (the loader's ValueError: a missing, tampered or invalid bundle), 1 if the Task failed to load
    otherwise."""
    started_ns = time.time_ns()
    try:
        sock = bind(server.host, server.port)
    except PortBusy as e:
        _say(f"error: {e}")
        return 2
    logging.basicConfig(level=server.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if server.host not in LOOPBACK:
        _say(f"warning: bound to {server.host}, reachable beyond this machine; the server has no authentication")
    _tune_process(engine)
    import uvicorn

    from qualflow.runtime import load_task  # noqa: F401 - the Task API is imported here, not on the load thread

    from .app import create_app

    failed: list[BaseException] = []
    uv: uvicorn.Server | None = None

    def on_load_error(e: BaseException) -> None:
        failed.append(e)
        uv.should_exit = True

    app = create_app(lambda: load_engine_task(server.bundle, engine), model_name=server.model_name,
                     timing_log=server.timing_log, started_ns=started_ns, on_load_error=on_load_error,
                     max_queue=server.max_queue, max_body_bytes=server.max_body_bytes,
                     reasoning_budgets=server.reasoning_budgets)
    uv = uvicorn.Server(uvicorn.Config(app, log_level=server.log_level, access_log=False, lifespan="on",
                                       timeout_graceful_shutdown=5))
    _say(f"listening on http://{server.host}:{sock.getsockname()[1]} (bundle {server.bundle}, "
         f"device {engine.device})")
    uv.run(sockets=[sock])
    if failed:
        _say(f"error: task load failed: {failed[0]}")
        return 2 if isinstance(failed[0], ValueError) else 1
    return 0


def add_serve_args(p: argparse.ArgumentParser) -> None:
    """Every flag of `qualflow serve`, from the two configs' fields."""
    add_arguments(p, ServerConfig)
    add_arguments(p, EngineConfig)


def main_serve(args: argparse.Namespace) -> int:
    return serve(from_args(ServerConfig, args), from_args(EngineConfig, args))
