"""The routes: POST /v1/responses (its endpoint: responses_endpoint), GET /health, GET /v1/models
and GET /v1/qualflow/task-timings (the Task timing records, paged)."""

from __future__ import annotations

import re

import orjson
from fastapi import FastAPI
from starlette.responses import Response
from starlette.routing import Route

from ..protocol.errors import ApiError
from .errors import error_response
from .responses_endpoint import ResponsesEndpoint
from .state import ServerState


def add_responses_route(app: FastAPI, endpoint: ResponsesEndpoint) -> None:
    """POST /v1/responses in FastAPI's route table (DirectRoutes serves it before the router, so the
    router only answers another method on that path: 405)."""
    app.router.routes.append(Route("/v1/responses", endpoint, methods=["POST"]))


def _health(state: ServerState) -> Response:
    handler = state.handler
    why = handler.health() if handler is not None else None
    peers = state.peers
    loading = handler is None or (
        peers is not None and not peers.all_ready()
    )  # every API process, if several
    status = "failed" if state.error or why else ("loading" if loading else "ok")
    body = {
        "status": status,
        "started_ns": state.started_ns,
        "error": state.error or why,
        "active_requests": state.admission.active,
        "admission_limit": state.admission.limit,
        "api_server_count": 1 if peers is None else peers.count,
    }
    if handler is None or (loading and not why):
        return Response(
            orjson.dumps(body),
            status_code=503,
            media_type="application/json",
            headers=None if state.error else {"retry-after": "2"},
        )
    t = state.task
    body.update(
        model=handler.model_name,
        ready_ns=state.ready_ns,
        startup_s=(state.ready_ns - state.started_ns) / 1e9,
        load_s=t.load_timing.get("load_s"),
        load_timing=t.load_timing,
        context_limit=t.context_limit,
        capabilities=sorted({*t.capabilities, *(["store"] if state.response_store else [])}),
        store=state.store_backend,
        reasoning=handler.reasoning_info(),
    )
    return Response(
        orjson.dumps(body), status_code=503 if why else 200, media_type="application/json"
    )


_INT = re.compile(r"-?[0-9]{1,19}")


def _int(name: str, value: str | None, default: int | None) -> int | None:
    if value is None:
        return default
    # ASCII digits only: str.isdigit() also takes '²' and other digits int() refuses
    ok = _INT.fullmatch(value) is not None
    if not ok or not -(2**63) <= int(value) < 2**63:
        raise ApiError(  # a signed 64-bit integer: the store's ints, the records' ns
            400, f"Invalid '{name}': expected a 64-bit integer.", param=name, code="invalid_type"
        )
    return int(value)


def add_status_routes(app: FastAPI, state: ServerState) -> None:
    @app.get("/health")
    async def health():
        return _health(state)

    @app.get("/v1/models")
    async def models():
        if state.handler is None:
            return error_response(
                ApiError(
                    503,
                    "The model is not loaded yet.",
                    "server_error",
                    None,
                    "model_not_ready",
                    retry_after=2,
                )
            )
        return {
            "object": "list",
            "data": [
                {
                    "id": state.handler.model_name,
                    "object": "model",
                    "created": state.started_ns // 10**9,
                    "owned_by": "qualflow",
                }
            ],
        }

    @app.get("/v1/qualflow/task-timings")
    async def task_timings(
        request_ids: str | None = None,
        since_ns: str | None = None,
        tag: str | None = None,
        after: str | None = None,
        limit: str | None = None,
    ):
        """Paged: at most `limit` (default 1000, max 10000) records after cursor `after`; the
        answer's `next_after` continues, `has_more` says whether to."""
        since, cursor = _int("since_ns", since_ns, None), _int("after", after, -1)
        n = _int("limit", limit, 1000)
        if not 1 <= n <= 10_000:
            raise ApiError(
                400, "Invalid 'limit': expected 1..10000.", param="limit", code="invalid_value"
            )
        ids = {i for i in request_ids.split(",") if i} if request_ids else None
        data, last, more = state.store.page(ids, since, tag, cursor, n)
        body = b"".join(
            (
                b'{"object":"list","data":[',
                b",".join(data),
                b'],"has_more":',
                b"true" if more else b"false",
                b',"next_after":',
                str(last).encode(),
                b"}",
            )
        )
        return Response(body, media_type="application/json")
