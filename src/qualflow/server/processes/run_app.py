"""Running the app in a process of `qualflow serve`: `run_app` (the ASGI server of
ServerConfig.http_server, asgi_servers, on the bound socket, the Task loading on a thread), and
what the serve processes share: `say` (their stderr lines), `tune_process` (an API process's
process-wide knobs) and `load_engine_task` (the Task, as the runtime loads it)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from typing import Any

from ..config import EngineConfig, ServerConfig


def say(message: str) -> None:
    print(f"qualflow serve: {message}", file=sys.stderr, flush=True)


def load_engine_task(bundle: str, engine: EngineConfig) -> Any:
    """The Task `qualflow serve` runs: `load_task(bundle, engine)`, the runtime's agreed
    signature."""
    from qualflow.runtime import load_task

    return load_task(bundle, engine)


def tune_process(engine: EngineConfig) -> None:
    """Process-wide knobs of an API process, set before the Task loads."""
    if engine.gil_switch_ms:  # the engine thread gets the GIL back sooner after its GPU wait
        sys.setswitchinterval(engine.gil_switch_ms / 1000)
    if (
        engine.cpu_threads
    ):  # intra-op threads; on a box shared with the load generator, fewer spin less
        import torch

        torch.set_num_threads(engine.cpu_threads)


def run_app(
    server: ServerConfig,
    sock: socket.socket,
    load: Callable[[], Any],
    started_ns: int,
    peers: Any = None,
) -> int:
    """The app under the ASGI server of `server.http_server` on `sock` until interrupted, its Task
    built by `load()` on a thread; the exit code (`serve`'s). `peers`: what it shares with the
    server's other API processes (api_servers)."""
    from ..api_keys import load_api_keys
    from ..app import add_state, create_app
    from ..store import StoreOpenError
    from .asgi_servers import asgi_server

    failed: list[BaseException] = []
    http: Any = None

    def on_load_error(e: BaseException) -> None:
        failed.append(e)
        http.stop()

    app = create_app(
        load,
        model_name=server.model_name,
        timing_log=server.timing_log,
        started_ns=started_ns,
        on_load_error=on_load_error,
        max_queue=server.max_queue,
        max_body_bytes=server.max_body_bytes,
        reasoning_budgets=server.reasoning_budgets,
        peers=peers,
    )
    try:
        retain = peers is None or peers.index == 0  # one process of the server prunes the store
        add_state(app, server.store, load_api_keys(server.api_key), retain=retain)
    except (StoreOpenError, ValueError) as e:
        say(f"error: {e}")
        return 2
    http = asgi_server(server.http_server, app, server.log_level)
    http.run(sock)
    if failed:
        say(f"error: task load failed: {failed[0]}")
        return 2 if isinstance(failed[0], ValueError) else 1
    return 0
