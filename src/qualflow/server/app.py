"""The HTTP app: `create_app` assembles the thin HTTP layer (`http/`) around the Responses handler.

All Responses semantics live in `handler` (the handler) and limits in `admission`; the app only
moves bytes and keeps the timing records."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from .admission import DEFAULT_MAX_BODY_BYTES
from .http.auth import ApiKeyMiddleware
from .http.errors import add_error_handlers
from .http.lifespan import lifespan_of
from .http.middleware import RequestIdMiddleware
from .http.openapi import add_openapi
from .http.responses_endpoint import DirectRoutes, ResponsesEndpoint
from .http.routes import add_responses_route, add_status_routes
from .http.state import ServerState
from .http.stored_routes import add_conversation_routes, add_response_routes
from .processes.peers import Peers
from .store import AsyncStore, StoreConfig, open_store
from .timing import TimingStore


def create_app(
    load: Callable[[], Any] | None = None,
    *,
    task: Any = None,
    model_name: str | None = None,
    timing_log: str | None = None,
    started_ns: int | None = None,
    on_load_error: Callable[[BaseException], None] | None = None,
    max_queue: int = 512,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    reasoning_budgets: tuple[int, ...] | None = None,
    peers: Peers | None = None,
) -> FastAPI:
    """`task`: an already loaded Task; or `load`: a callable loading one, run on a thread after
    the server starts so that /health answers 503 while loading. At most the Task's batch +
    `max_queue` requests are admitted at once; more get 429. `reasoning_budgets`: thinking
    budgets per effort over the family's. `peers`: what this app shares with the server's other
    API processes (admission, readiness), if any."""
    state = ServerState(
        task=task,
        model_name=model_name,
        started_ns=started_ns or time.time_ns(),
        max_queue=max_queue,
        store=TimingStore(log_path=timing_log),
        reasoning_budgets=reasoning_budgets,
        peers=peers,
    )
    app = FastAPI(
        title="qualflow Responses server",
        lifespan=lifespan_of(state, load, task, on_load_error),
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    responses = ResponsesEndpoint(state, max_body_bytes)
    app.add_middleware(DirectRoutes, routes={("POST", "/v1/responses"): responses})
    app.add_middleware(RequestIdMiddleware)  # added last: it runs first, around every route
    app.state.server_state, app.state.store, app.state.admission = (
        state,
        state.store,
        state.admission,
    )
    add_responses_route(app, responses)
    add_status_routes(app, state)
    add_error_handlers(app)
    add_openapi(app)
    return app


def add_state(
    app: FastAPI,
    store: StoreConfig | None = None,
    api_keys: frozenset[str] = frozenset(),
    *,
    retain: bool = True,
) -> None:
    """Make a created app stateful: the response store of `store.url` (opened and migrated now:
    StoreOpenError, naming the URL without its password, if it cannot be), its routes, and its
    retention (where `retain`: one process of a server runs it); `api_keys`: Bearer auth on every
    /v1 route, each stored object visible only with the key that made it."""
    state: ServerState = app.state.server_state
    if store is not None and store.url is not None:
        sql = open_store(store.url)
        state.response_store, state.store_config = AsyncStore(sql), store
        state.store_backend, state.retain = sql.engine.dialect.name, retain
        add_response_routes(app, state)
        add_conversation_routes(app, state)
    if api_keys:
        app.add_middleware(ApiKeyMiddleware, keys=api_keys)
