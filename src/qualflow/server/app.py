"""The thin HTTP layer: routes, JSON / SSE rendering, OpenAI-shaped error bodies, request identity.

All Responses semantics live in `responses` (the handler); this file only moves bytes and keeps the timing records.
"""
from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
import uuid
from contextlib import asynccontextmanager, suppress
from typing import Any, AsyncIterator, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response, StreamingResponse

from qualflow.phases import PHASE_HEADER

from .responses import ResponsesHandler
from .protocol import ApiError, Event, new_id, parse_request
from .timing import TimingRecord, TimingStore, new_record

log = logging.getLogger("qualflow.server")
_SAFE_ID = re.compile(r"^[\x21-\x7e]{1,256}$")   # printable ASCII, no spaces: safe to echo in a header


class RequestIdMiddleware:
    """Pure ASGI: take X-Request-ID (or make one), note the receive time, echo the id on every response."""

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

        async def send_with_id(message):
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        await self.app(scope, receive, send_with_id)


def error_response(e: ApiError, background: BackgroundTask | None = None) -> JSONResponse:
    headers = {"x-should-retry": "false"} if e.status >= 500 else None
    return JSONResponse(e.body(), status_code=e.status, headers=headers, background=background)


async def _until_disconnect(request: Request, work: Any) -> Any:
    """Await `work`, cancelling it (and so its Task request) if the client disconnects first."""
    task = asyncio.ensure_future(work)

    async def watch():
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(watch())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
            raise ConnectionAbortedError("client disconnected")
    return task.result()


def create_app(load: Callable[[], Any] | None = None, *, task: Any = None, model_name: str | None = None,
               timing_log: str | None = None, started_ns: int | None = None,
               on_load_error: Callable[[BaseException], None] | None = None) -> FastAPI:
    """`task`: an already loaded Task; or `load`: a callable loading one, run on a thread after the server
    starts so that /health answers 503 while loading."""
    started_ns = started_ns or time.time_ns()
    store = TimingStore(log_path=timing_log)
    state: dict[str, Any] = {"handler": None, "error": None, "ready_ns": None, "task": task}

    def become_ready(t):
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
        store.close()

    app = FastAPI(title="qualflow Responses server", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.add_middleware(RequestIdMiddleware)
    app.state.store, app.state.server_state = store, state

    def finish(rec: TimingRecord, http_status: int) -> None:
        """The last byte is out: finalize the record, or once its Task request ends (client gone early)."""
        sent_ns, handler = time.time_ns(), state["handler"]
        running = handler.inflight.get(rec.response_id) if handler else None
        if running is not None:
            running.producer.add_done_callback(lambda _: finalize(rec, http_status, sent_ns))
        else:
            finalize(rec, http_status, sent_ns)

    def finalize(rec: TimingRecord, http_status: int, sent_ns: int) -> None:
        rec.http_status = rec.http_status or http_status
        store.finish(rec, sent_ns)
        t = rec.public_task_call_wall_ns
        log.info("request_id=%s response_id=%s tag=%s stream=%s http=%s status=%s finish=%s in=%s out=%s "
                 "task_ms=%s http_ms=%.1f%s", rec.request_id, rec.response_id, rec.tag, rec.stream,
                 rec.http_status, rec.status, rec.finish_reason, rec.input_tokens,
                 rec.output_tokens, None if t is None else round(t / 1e6, 1),
                 (rec.http_sent_ns - rec.http_received_ns) / 1e6,
                 f" error={rec.error!r}" if rec.error else "")

    class EventStream(StreamingResponse):
        """SSE frames of the handler's events. Cleans up however the response ends, even if the body never
        started (client gone before the headers): the Task request is cancelled, the record finalized."""

        def __init__(self, handler: ResponsesHandler, events: AsyncIterator[Event], rec: TimingRecord):
            super().__init__((f"event: {e.type}\ndata: {e.model_dump_json()}\n\n" async for e in events),
                             media_type="text/event-stream")
            self.handler, self.events, self.rec = handler, events, rec

        async def __call__(self, scope, receive, send):
            try:
                await super().__call__(scope, receive, send)
            finally:
                self.handler.abandon(self.rec.response_id)   # no-op when the final event was consumed
                await self.body_iterator.aclose()
                await self.events.aclose()
                finish(self.rec, 200)

    @app.post("/v1/responses")
    async def responses(request: Request):
        rid, received_ns = request.state.request_id, request.state.received_ns
        rec = store.add(new_record(rid, new_id("resp"), request.headers.get(PHASE_HEADER), None, received_ns))
        try:
            handler: ResponsesHandler | None = state["handler"]
            if handler is None:
                raise ApiError(503, f"The model is not loaded yet ({state['error'] or 'loading'}).",
                               "server_error", None, "model_not_ready")
            req = parse_request(await request.body())
            rec.stream = bool(req.stream)
            if req.stream:
                return EventStream(handler, handler.stream_response(req, rid, rec), rec)
            resp = await _until_disconnect(request, handler.create_response(req, rid, rec))
            return Response(resp.model_dump_json(), media_type="application/json",
                            background=BackgroundTask(finish, rec, 200))
        except ApiError as e:
            if e.status < 500:
                rec.reject(e.status, e.message)
            else:
                rec.fail(e.message, e.status)
            e.message = f"{e.message} (request id {rid})" if rid not in e.message else e.message
            return error_response(e, BackgroundTask(finish, rec, e.status))
        except ConnectionAbortedError:
            finish(rec, 499)
            return Response(status_code=499)

    @app.get("/health")
    async def health():
        body = {"status": "ok" if state["handler"] else ("failed" if state["error"] else "loading"),
                "started_ns": started_ns, "error": state["error"]}
        if state["handler"] is None:
            return JSONResponse(body, status_code=503)
        t = state["task"]
        body.update(model=state["handler"].model_name, ready_ns=state["ready_ns"],
                    startup_s=(state["ready_ns"] - started_ns) / 1e9, load_s=t.load_timing.get("load_s"),
                    load_timing=t.load_timing, context_limit=t.context_limit,
                    capabilities=sorted(t.capabilities))
        return body

    @app.get("/v1/models")
    async def models():
        if state["handler"] is None:
            return error_response(ApiError(503, "The model is not loaded yet.", "server_error", None,
                                           "model_not_ready"))
        return {"object": "list", "data": [{"id": state["handler"].model_name, "object": "model",
                                            "created": started_ns // 10**9, "owned_by": "qualflow"}]}

    @app.get("/v1/qualflow/task-timings")
    async def task_timings(request_ids: str | None = None, since_ns: str | None = None, tag: str | None = None):
        if since_ns is not None and not since_ns.lstrip("-").isdigit():
            raise ApiError(400, "Invalid 'since_ns': expected an integer (epoch ns).", param="since_ns",
                           code="invalid_type")
        ids = {i for i in request_ids.split(",") if i} if request_ids else None
        data = store.query(ids, None if since_ns is None else int(since_ns), tag)
        return {"object": "list", "data": data}

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

    @app.exception_handler(Exception)
    async def on_crash(request: Request, e: Exception):
        rid = getattr(request.state, "request_id", None)
        log.exception("request_id=%s unhandled error", rid)
        return error_response(ApiError(500, f"Internal server error: {type(e).__name__}: {e} (request id {rid})",
                                       "server_error", None, "server_error"))

    return app
