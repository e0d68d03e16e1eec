"""`qualflow serve`: one process serving one bundle. Its flags are generated from ServerConfig
and the runtime's EngineConfig; `serve(server, engine)` binds the port before anything loads,
then runs the app under its ASGI server (uvicorn or granian) while the Task loads on a thread
(`run_app`). With --api-server-count N > 1 this process starts one engine process and N API
processes on the socket instead (`api_servers`)."""

from __future__ import annotations

import argparse
import logging
import time

from qualflow.configs import add_arguments, from_args

from ..config import EngineConfig, ServerConfig
from .listen import PortBusy, bind
from .run_app import load_engine_task, run_app, say, tune_process

LOOPBACK = ("127.0.0.1", "localhost", "::1")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def serve(server: ServerConfig, engine: EngineConfig) -> int:
    """Run the server until interrupted. Returns the process exit code: 2 for a busy port or bad
    input (the loader's ValueError: a missing, tampered or invalid bundle), 1 if the Task failed
    to load otherwise."""
    started_ns = time.time_ns()
    try:
        sock = bind(server.host, server.port)
    except PortBusy as e:
        say(f"error: {e}")
        return 2
    logging.basicConfig(level=server.log_level.upper(), format=LOG_FORMAT)
    if (why := check_state(server)) is not None:
        say(f"error: {why}")
        return 2
    if server.host not in LOOPBACK and server.api_key is None:
        say(
            f"warning: bound to {server.host}, reachable beyond this machine; the server has no "
            "authentication (--api-key)"
        )
    if server.api_server_count > 1:
        from .api_servers import serve_api_processes

        return serve_api_processes(server, engine, sock, started_ns)
    tune_process(engine)
    # the Task API is imported here, not on the load thread
    from qualflow.runtime import load_task  # noqa: F401

    say(
        f"listening on http://{server.host}:{sock.getsockname()[1]} (bundle {server.bundle}, "
        f"device {engine.device})"
    )
    return run_app(server, sock, lambda: load_engine_task(server.bundle, engine), started_ns)


def check_state(server: ServerConfig) -> str | None:
    """Why the server cannot start with its API keys and response store (the store opened and
    migrated once here, before any API process opens it), or None."""
    from ..api_keys import load_api_keys
    from ..store import StoreOpenError, open_store

    try:
        load_api_keys(server.api_key)
        if server.store.url is not None:
            open_store(server.store.url).close()
    except (StoreOpenError, ValueError) as e:
        return str(e)
    return None


def add_serve_args(p: argparse.ArgumentParser) -> None:
    """Every flag of `qualflow serve`, from the two configs' fields."""
    add_arguments(p, ServerConfig)
    add_arguments(p, EngineConfig)


def main_serve(args: argparse.Namespace) -> int:
    return serve(from_args(ServerConfig, args), from_args(EngineConfig, args))
