"""The thin HTTP layer: routes, JSON / SSE rendering, OpenAI-shaped error bodies, request identity.

All Responses semantics live in `responses` (the handler) and limits in `admission`; this file only
moves bytes and keeps the timing records: every request gets one, and every path out of a request
finalizes it exactly once.
"""
from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException
from starlette.responses import Response

from qualflow.phases import PHASE_HEADER

from .admission import DEFAULT_MAX_BODY_BYTES, Admission, check_content_type, read_body
from .protocol import ApiError, ResponseEvent, new_id, parse_request, sse_frame
from .responses import Prepared, ResponsesHandler, engine_unavailable
from .timing import TimingRecord, TimingStore, new_record

log = logging.getLogger("qualflow.server")
_SAFE_ID = re.compile(r"^[\x21-\x7e]{1,256}$")   # printable ASCII, no spaces: safe to echo in a header
OFFLOAD_BYTES = 64 << 10   # bodies above this are parsed, templated and tokenized off the event loop
_JSON = [(b"content-type", b"application/json")]


class RequestIdMiddleware:
    """Pure ASGI: take X-Request-ID (or make one), note the receive time, echo the id on every response.
    Also the last guard: an exception nobody handled becomes a 500 in OpenAI's shape (and the
    connection stays usable) instead of a cut response."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        received_ns = time.time_ns()
        rid = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"x-request-id"), "")
        rid = rid if _SAFE_ID.match(rid) else str(uuid.uuid4())
        scope.setdefault("state", {}).update(request_id=rid, received_ns=received_ns)
        header = (b"x-request-id", rid.encode())
        started = False

        async def send_with_id(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as e:  # noqa: BLE001
            log.exception("request_id=%s unhandled error", rid)
            if not started:
                err = ApiError(500, f"Internal server error: {type(e).__name__} (request id {rid})",
                               "server_error", None, "server_error")
                await send_with_id({"type": "http.response.start", "status": 500,
                                    "headers": [*_JSON, *((k.encode(), v.encode()) for k, v in err.headers().items())]})
                await send({"type": "http.response.body", "body": orjson.dumps(err.body())})


def error_response(e: ApiError, background: BackgroundTask | None = None) -> Response:
    headers = e.headers()
    if e.status == 413:
        headers["connection"] = "close"   # the rest of the body is not read
    return Response(orjson.dumps(e.body()), status_code=e.status, headers=headers,
                    media_type="application/json", background=background)


def _is_last(batch: list) -> bool:
    e = batch[-1]
    return isinstance(e, ResponseEvent) and e.type not in ("response.created", "response.in_progress")


def _watch_disconnect(receive, on_gone: Callable[[], None]) -> asyncio.Task:
    async def watch():
        while (await receive())["type"] != "http.disconnect":
            pass
        on_gone()
    return asyncio.ensure_future(watch())


class EventStream(Response):
    """SSE of the handler's event batches: each batch (one engine step's delta, or the head / tail) is
    one write. A client that leaves cancels the Task request; the stream is still drained to the
    Task's final event (which comes at once), so the record gets the Task's own outcome and timing."""

    HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
               (b"x-accel-buffering", b"no")]

    def __init__(self, batches: AsyncIterator[list], on_gone: Callable[[], None], on_done: Callable[[], None]):
        self.status_code, self.background = 200, None
        self.raw_headers = list(self.HEADERS)
        self.batches, self.on_gone, self.on_done = batches, on_gone, on_done

    async def __call__(self, scope, receive, send):
        gone = False

        def left():
            nonlocal gone
            gone = True
            self.on_gone()

        watcher = _watch_disconnect(receive, left)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for batch in self.batches:
                if not gone:
                    last = _is_last(batch)
                    await send({"type": "http.response.body", "body": b"".join(map(sse_frame, batch)),
                                "more_body": not last})
        finally:
            watcher.cancel()
            await self.batches.aclose()
            self.on_done()


def create_app(load: Callable[[], Any] | None = None, *, task: Any = None, model_name: str | None = None,
               timing_log: str | None = None, started_ns: int | None = None,
               on_load_error: Callable[[BaseException], None] | None = None, max_queue: int = 512,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, timing_store: TimingStore | None = None) -> FastAPI:
    """`task`: an already loaded Task; or `load`: a callable loading one, run on a thread after the server
    starts so that /health answers 503 while loading. At most the Task's batch + `max_queue` requests
    are admitted at once; more get 429."""
    started_ns = started_ns or time.time_ns()
    store = timing_store or TimingStore(log_path=timing_log)
    state: dict[str, Any] = {"handler": None, "error": None, "ready_ns": None, "task": task}
    admission = Admission(max_queue)
    prep_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="qualflow-prepare")

    def become_ready(t):
        admission.limit = int(getattr(t, "max_batch", 1)) + max_queue
        state["task"], state["handler"], state["ready_ns"] = t, ResponsesHandler(t, model_name), time.time_ns()
        log.info("ready: model %r loaded in %.2fs, startup %.2fs", state["handler"].model_name,
                 t.load_timing.get("load_s", float("nan")), (state["ready_ns"] - started_ns) / 1e9)

    def load_in_background():
        try:
            become_ready(load())
        except BaseException as e:  # noqa: BLE001 - reported on /health and by the exit code
            state["error"] = f"{type(e).__name__}: {e}"
            log.exception("task load failed")
            if on_load_error:
                on_load_error(e)

    @asynccontextmanager
    async def lifespan(app):
        if task is not None:
            become_ready(task)
        elif load is not None:
            threading.Thread(target=load_in_background, name="task-load", daemon=True).start()
        yield
        if state["task"] is not None:
            state["task"].close()
        prep_pool.shutdown(wait=False)
        store.close()

    app = FastAPI(title="qualflow Responses server", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.add_middleware(RequestIdMiddleware)
    app.state.store, app.state.server_state, app.state.admission = store, state, admission

    def finish(rec: TimingRecord, http_status: int, admitted: bool) -> None:
        """The last byte is out (or the request is over): finalize the record, once."""
        if rec.http_sent_ns is not None:
            return
        if admitted:
            admission.leave()
        rec.http_status = rec.http_status or http_status
        if rec.status == "in_progress":   # nothing decided it: it ended without an outcome
            rec.fail("the request ended without an outcome", http_status)
        store.finish(rec, time.time_ns())
        if log.isEnabledFor(logging.INFO):
            t = rec.public_task_call_wall_ns
            log.info("request_id=%s response_id=%s tag=%s stream=%s http=%s status=%s finish=%s in=%s out=%s "
                     "task_ms=%s http_ms=%.1f%s", rec.request_id, rec.response_id, rec.tag, rec.stream,
                     rec.http_status, rec.status, rec.finish_reason, rec.input_tokens,
                     rec.output_tokens, None if t is None else round(t / 1e6, 1),
                     (rec.http_sent_ns - rec.http_received_ns) / 1e6,
                     f" error={rec.error!r}" if rec.error else "")

    def ready_handler() -> ResponsesHandler:
        handler: ResponsesHandler | None = state["handler"]
        if handler is None:
            if state["error"]:
                raise ApiError(503, f"The model failed to load ({state['error']}).", "server_error", None,
                               "model_not_ready")
            raise ApiError(503, "The model is not loaded yet (loading).", "server_error", None,
                           "model_not_ready", retry_after=2)
        if (why := handler.health()) is not None:
            raise engine_unavailable(why)
        return handler

    @app.post("/v1/responses")
    async def responses(request: Request):
        rid, received_ns = request.state.request_id, request.state.received_ns
        rec = store.add(new_record(rid, new_id("resp"), request.headers.get(PHASE_HEADER), None, received_ns))
        admitted = False
        try:
            handler = ready_handler()
            admission.enter()
            admitted = True
            check_content_type(request.headers.get("content-type"))
            body = await read_body(request, max_body_bytes)

            def prepare() -> Prepared:
                req = parse_request(body)
                rec.stream = bool(req.stream)
                return handler.prepare(req, rid, rec)

            if len(body) > OFFLOAD_BYTES:
                p = await asyncio.get_running_loop().run_in_executor(prep_pool, prepare)
            else:
                p = prepare()
            ready_handler()
            if p.req.stream:
                return EventStream(handler.stream_batches(p), lambda: handler.abandon(p.response_id),
                                   lambda: finish(rec, 200, admitted))
            work = asyncio.ensure_future(handler.create_response(p.req, rid, rec, prepared=p))
            watcher = _watch_disconnect(request.receive, lambda: handler.abandon(p.response_id))
            try:
                resp = await work
            finally:
                watcher.cancel()
            return Response(resp.__pydantic_serializer__.to_json(resp), media_type="application/json",
                            background=BackgroundTask(finish, rec, 200, admitted))
        except ApiError as e:
            if rec.status == "cancelled":   # the client left; nobody reads this answer
                finish(rec, 499, admitted)
                return Response(status_code=499)
            if e.status < 500 or e.code == "model_not_ready":
                rec.reject(e.status, e.message)
            else:
                rec.fail(e.message, e.status)
            e.message = f"{e.message} (request id {rid})" if rid not in e.message else e.message
            return error_response(e, BackgroundTask(finish, rec, e.status, admitted))
        except BaseException as e:
            rec.fail(f"{type(e).__name__}: {e}", 500)
            finish(rec, 500, admitted)
            raise

    @app.get("/health")
    async def health():
        handler = state["handler"]
        why = handler.health() if handler is not None else None
        status = "failed" if state["error"] or why else ("ok" if handler else "loading")
        body = {"status": status, "started_ns": started_ns, "error": state["error"] or why,
                "active_requests": admission.active, "admission_limit": admission.limit}
        if handler is None:
            return Response(orjson.dumps(body), status_code=503, media_type="application/json",
                            headers=None if state["error"] else {"retry-after": "2"})
        t = state["task"]
        body.update(model=handler.model_name, ready_ns=state["ready_ns"],
                    startup_s=(state["ready_ns"] - started_ns) / 1e9, load_s=t.load_timing.get("load_s"),
                    load_timing=t.load_timing, context_limit=t.context_limit,
                    capabilities=sorted(t.capabilities))
        return Response(orjson.dumps(body), status_code=503 if why else 200, media_type="application/json")

    @app.get("/v1/models")
    async def models():
        if state["handler"] is None:
            return error_response(ApiError(503, "The model is not loaded yet.", "server_error", None,
                                           "model_not_ready", retry_after=2))
        return {"object": "list", "data": [{"id": state["handler"].model_name, "object": "model",
                                            "created": started_ns // 10**9, "owned_by": "qualflow"}]}

    def _int(name: str, value: str | None, default: int | None) -> int | None:
        if value is None:
            return default
        if not value.lstrip("-").isdigit() or len(value) > 20:
            raise ApiError(400, f"Invalid '{name}': expected an integer.", param=name, code="invalid_type")
        return int(value)

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
        data, last, more = store.page(ids, since, tag, cursor, n)
        body = b"".join((b'{"object":"list","data":[', b",".join(data), b'],"has_more":',
                         b"true" if more else b"false", b',"next_after":', str(last).encode(), b"}"))
        return Response(body, media_type="application/json")

    @app.exception_handler(ApiError)
    async def on_api_error(request: Request, e: ApiError):
        return error_response(e)

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, e: RequestValidationError):
        err = e.errors()[0]
        param = ".".join(str(p) for p in err["loc"][1:]) or None
        return error_response(ApiError(400, f"Invalid request: {err['msg']}.", param=param, code="invalid_type"))

    @app.exception_handler(HTTPException)
    async def on_http_error(request: Request, e: HTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code, "http_error")
        return error_response(ApiError(e.status_code, f"{e.detail}: {request.method} {request.url.path}",
                                       param=None, code=code))

    return app
