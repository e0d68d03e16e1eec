"""The app's lifespan: the Task is ready when the server starts (given), or loads on a thread after
it starts (so /health answers 503 while loading); at shutdown the Task and the stores close."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

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
        yield
        state.close()

    return lifespan
