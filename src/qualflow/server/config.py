"""The two configs of `qualflow serve`: ServerConfig (its HTTP side, here) and EngineConfig (how the
Task runs its engine, owned by the runtime). The field defaults are the only defaults; the flags are
generated from the fields (qualflow.configs)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Literal

from qualflow.configs import setting
from qualflow.runtime import EngineConfig

from .store.config import StoreConfig

__all__ = ["EngineConfig", "ServerConfig", "StoreConfig"]


@dataclass(frozen=True)
class ServerConfig:
    bundle: str = setting(help="bundle directory (qualflow build --out)")
    host: str = setting(
        "127.0.0.1", help="address to bind (beyond loopback the server warns: no authentication)"
    )
    port: int = setting(8000, help="0 picks a free port (printed on stderr)")
    model_name: str | None = setting(
        None, help="served model name (default: the bundle's checkpoint id)"
    )
    timing_log: str | None = setting(
        None, help="append one JSONL Task timing record per request here"
    )
    max_queue: int = setting(
        512,
        help="requests that may wait beyond the running batch; more are answered "
        "429 + Retry-After (with --api-server-count N: batch + queue in all, "
        "whichever API process accepted them)",
    )
    max_body_bytes: int = setting(8 << 20, help="request body cap (413 above it)")
    log_level: Literal["debug", "info", "warning", "error"] = setting(
        "info", help="server log level"
    )
    reasoning_budgets: tuple[int, int, int, int] | None = setting(
        None,
        metavar=("MINIMAL", "LOW", "MEDIUM", "HIGH"),
        help="thinking budget (reasoning tokens) of each reasoning.effort, 0 = unbounded "
        "(default: the family's)",
    )
    http_server: Literal["uvicorn", "granian"] = setting(
        "uvicorn",
        help="the ASGI server the app runs under: uvicorn, or granian (a Rust HTTP server; "
        "pip install 'qualflow[serve-native]')",
    )
    api_server_count: int = setting(
        1,
        help="HTTP (API) processes serving the port, all in front of one engine process (the "
        "model, or the synthetic engine) that each reaches over its own pipes; 1: one process, the "
        "engine in it or in its child (--engine-process). Above 1 the timing log gets every "
        "process's records, while /v1/qualflow/task-timings answers with those of the process "
        "that took the connection",
    )

    store: StoreConfig = setting(
        StoreConfig(),
        help="the response store (its flags: --store, --store-max-age-s, --store-max-responses, "
        "...); with --api-server-count N every API process shares it",
    )
    api_key: str | None = setting(
        None,
        help="API keys required as `Authorization: Bearer KEY` on every /v1 route: env:VAR (the "
        "variable holds them, comma- or newline-separated) or file:PATH (one a line); none: no "
        "authentication, one tenant. Stored objects are visible only with the key that made them",
    )

    def __post_init__(self):
        if self.http_server == "granian" and importlib.util.find_spec("granian") is None:
            raise ValueError(
                "http_server (--http-server) granian needs the granian package: "
                "pip install 'qualflow[serve-native]'"
            )
        if self.api_server_count < 1:
            raise ValueError(
                "api_server_count (--api-server-count) must be at least 1, not "
                f"{self.api_server_count}"
            )
