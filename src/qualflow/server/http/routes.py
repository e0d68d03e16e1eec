"""The routes: POST /v1/responses (rendering the handler's Response or event stream), GET /health,
GET /v1/models and GET /v1/qualflow/task-timings (the Task timing records, paged)."""
from __future__ import annotations

import asyncio

import orjson
from fastapi import FastAPI, Request
from starlette.background import BackgroundTask
from starlette.responses import Response

from qualflow.phases import PHASE_HEADER

from ..admission import check_content_type, read_body
from ..protocol import ApiError, new_id, parse_request
from ..responses import Prepared, ResponsesHandler
from ..timing import TimingRecord, new_record
from .errors import error_response
from .state import ServerState
from .streaming import EventStream, watch_disconnect

OFFLOAD_BYTES = 64 << 10   # bodies above this are parsed, templated and tokenized off the event loop


async def _prepare(state: ServerState, handler: ResponsesHandler, body: bytes, rid: str,
                   rec: TimingRecord) -> Prepared:
    """Parse, template and tokenize the request (a large one on the prepare pool)."""
    def prepare() -> Prepared:
        req = parse_request(body)
        rec.stream = bool(req.stream)
        return handler.prepare(req, rid, rec)

    if len(body) > OFFLOAD_BYTES:
        return await asyncio.get_running_loop().run_in_executor(state.prep_pool, prepare)
    return prepare()


async def _answer(state: ServerState, handler: ResponsesHandler, p: Prepared, request: Request,
                  admitted: bool) -> Response:
    """The event stream, or the whole Response once the Task is done (a client that leaves first
    cancels the Task request)."""
    rec = p.record
    if p.req.stream:
        return EventStream(handler.stream_batches(p), lambda: handler.abandon(p.response_id),
                           lambda: state.finish(rec, 200, admitted))
    work = asyncio.ensure_future(handler.create_response(p.req, p.record.request_id, rec, prepared=p))
    watcher = watch_disconnect(request.receive, lambda: handler.abandon(p.response_id))
    try:
        resp = await work
    finally:
        watcher.cancel()
    return Response(resp.__pydantic_serializer__.to_json(resp), media_type="application/json",
                    background=BackgroundTask(state.finish, rec, 200, admitted))


def _refused(state: ServerState, e: ApiError, rec: TimingRecord, rid: str, admitted: bool) -> Response:
    """An ApiError as the answer (recorded as a rejection or a failure); nothing for a client that left."""
    if rec.status == "cancelled":   # the client left; nobody reads this answer
        state.finish(rec, 499, admitted)
        return Response(status_code=499)
    if e.status < 500 or e.code == "model_not_ready":
        rec.reject(e.status, e.message)
    else:
        rec.fail(e.message, e.status)
    e.message = f"{e.message} (request id {rid})" if rid not in e.message else e.message
    return error_response(e, BackgroundTask(state.finish, rec, e.status, admitted))


def add_responses_route(app: FastAPI, state: ServerState, max_body_bytes: int) -> None:
    @app.post("/v1/responses")
    async def responses(request: Request):
        rid, received_ns = request.state.request_id, request.state.received_ns
        rec = state.store.add(new_record(rid, new_id("resp"), request.headers.get(PHASE_HEADER), None, received_ns))
        admitted = False
        try:
            handler = state.ready_handler()
            state.admission.enter()
            admitted = True
            check_content_type(request.headers.get("content-type"))
            body = await read_body(request, max_body_bytes)
            p = await _prepare(state, handler, body, rid, rec)
            state.ready_handler()
            return await _answer(state, handler, p, request, admitted)
        except ApiError as e:
            return _refused(state, e, rec, rid, admitted)
        except BaseException as e:
            rec.fail(f"{type(e).__name__}: {e}", 500)
            state.finish(rec, 500, admitted)
            raise


def _health(state: ServerState) -> Response:
    handler = state.handler
    why = handler.health() if handler is not None else None
    peers = state.peers
    loading = handler is None or (peers is not None and not peers.all_ready())   # every API process, if several
    status = "failed" if state.error or why else ("loading" if loading else "ok")
    body = {"status": status, "started_ns": state.started_ns, "error": state.error or why,
            "active_requests": state.admission.active, "admission_limit": state.admission.limit,
            "api_server_count": 1 if peers is None else peers.count}
    if handler is None or (loading and not why):
        return Response(orjson.dumps(body), status_code=503, media_type="application/json",
                        headers=None if state.error else {"retry-after": "2"})
    t = state.task
    body.update(model=handler.model_name, ready_ns=state.ready_ns,
                startup_s=(state.ready_ns - state.started_ns) / 1e9, load_s=t.load_timing.get("load_s"),
                load_timing=t.load_timing, context_limit=t.context_limit,
                capabilities=sorted(t.capabilities), reasoning=handler.reasoning_info())
    return Response(orjson.dumps(body), status_code=503 if why else 200, media_type="application/json")


def _int(name: str, value: str | None, default: int | None) -> int | None:
    if value is None:
        return default
    if not value.lstrip("-").isdigit() or len(value) > 20:
        raise ApiError(400, f"Invalid '{name}': expected an integer.", param=name, code="invalid_type")
    return int(value)


def add_status_routes(app: FastAPI, state: ServerState) -> None:
    @app.get("/health")
    async def health():
        return _health(state)

    @app.get("/v1/models")
    async def models():
        if state.handler is None:
            return error_response(ApiError(503, "The model is not loaded yet.", "server_error", None,
                                           "model_not_ready", retry_after=2))
        return {"object": "list", "data": [{"id": state.handler.model_name, "object": "model",
                                            "created": state.started_ns // 10**9, "owned_by": "qualflow"}]}

    @app.get("/v1/qualflow/task-timings")
    async def task_timings(request_ids: str | None = None, since_ns: str | None = None, tag: str | None = None,
                           after: str | None = None, limit: str | None = None):
        """Paged: at most `limit` (default 1000, max 10000) records after cursor `after`; the answer's
        `next_after` continues, `has_more` says whether to."""
        since, cursor = _int("since_ns", since_ns, None), _int("after", after, -1)
        n = _int("limit", limit, 1000)
        if not 1 <= n <= 10_000:
            raise ApiError(400, "Invalid 'limit': expected 1..10000.", param="limit", code="invalid_value")
        ids = {i for i in request_ids.split(",") if i} if request_ids else None
        data, last, more = state.store.page(ids, since, tag, cursor, n)
        body = b"".join((b'{"object":"list","data":[', b",".join(data), b'],"has_more":',
                         b"true" if more else b"false", b',"next_after":', str(last).encode(), b"}"))
        return Response(body, media_type="application/json")
