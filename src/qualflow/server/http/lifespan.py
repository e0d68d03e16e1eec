"""The app's lifespan: the Task is ready when the server starts (given), or loads on a thread after
it starts (so /health answers 503 while loading); the response store's retention runs
in the background; at shutdown the Task and the stores close."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

from ..store import retain
from .state import ServerState

log = logging.getLogger("qualflow.server")


def _load_in_background(
    state: ServerState,
    load: Callable[[], Any],
    on_load_error: Callable[[BaseException], None] | None,
) -> None:
    try:
        state.become_ready(load())
    except BaseException as e:  # noqa: BLE001 - reported on /health and by the exit code
        state.error = f"{type(e).__name__}: {e}"
        log.exception("task load failed")
        if on_load_error:
            on_load_error(e)


def lifespan_of(
    state: ServerState,
    load: Callable[[], Any] | None,
    task: Any,
    on_load_error: Callable[[BaseException], None] | None,
):
    """The ASGI lifespan for FastAPI(lifespan=...)."""

    @asynccontextmanager
    async def lifespan(app):
        if task is not None:
            state.become_ready(task)
        elif load is not None:
            threading.Thread(
                target=_load_in_background,
                args=(state, load, on_load_error),
                name="task-load",
                daemon=True,
            ).start()
        stop, keeper = asyncio.Event(), None
        if state.retain and state.response_store is not None:
            keeper = asyncio.create_task(
                retain(state.response_store.store, state.store_config, stop)
            )
        yield
        if keeper is not None:
            stop.set()
            await keeper
        state.close()

    return lifespan
