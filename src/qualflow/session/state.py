"""Stored state in a session that serves with it (`--state`): our server's response store, a SQLite
file under the session directory (a new one each session), and two API keys made for the session,
handed to the server through its environment (never on its command line). The first key is the
clients'; the second lets the state checks see what another key sees."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Mapping
from pathlib import Path

from qualflow.server.config import ServerConfig, StoreConfig

KEYS_VAR = "QUALFLOW_SESSION_API_KEYS"  # the server's --api-key env:KEYS_VAR
STORE_FILE = "store.db"
N_KEYS = 2


def with_state(server: ServerConfig, out: Path) -> tuple[ServerConfig, dict[str, str]]:
    """`server` with a fresh store under `out` and API keys, and the environment holding them."""
    for suffix in ("", "-wal", "-shm", "-journal"):  # an earlier session's store is not this one's
        (out / f"{STORE_FILE}{suffix}").unlink(missing_ok=True)
    keys = [f"qf-session-{secrets.token_urlsafe(18)}" for _ in range(N_KEYS)]
    server = dataclasses.replace(
        server, store=StoreConfig(url=str(out / STORE_FILE)), api_key=f"env:{KEYS_VAR}"
    )
    return server, {KEYS_VAR: ",".join(keys)}


def session_keys(env: Mapping[str, str]) -> tuple[str, ...]:
    """The session's API keys, from the server's environment (none: the server takes no key)."""
    return tuple(k for k in env.get(KEYS_VAR, "").split(",") if k)
