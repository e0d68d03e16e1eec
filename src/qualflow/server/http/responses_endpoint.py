"""POST /v1/responses as a raw ASGI endpoint: the handler's Response or event stream, rendered.

`DirectRoutes` hands this endpoint its requests straight from the request-id middleware, past
FastAPI's router, dependency solving and exit stacks (about 0.15 ms of a c1 request on a 2-core
box). It does everything that machinery did for it: reads the headers and the capped body from
the ASGI scope, and answers every refusal itself, in OpenAI's shape, with the request's timing
record."""

from __future__ import annotations

import asyncio

from starlette.background import BackgroundTask
from starlette.responses import Response

from qualflow.phases import PHASE_HEADER

from .. import stateful
from ..admission import ClientLeft, check_content_type, read_body
from ..handler import Prepared, ResponsesHandler
from ..protocol.errors import ApiError
from ..protocol.requests import parse_request
from ..protocol.responses import new_id
from ..store import ANONYMOUS
from ..stored_stream import StoredStream
from ..timing import TimingRecord, new_record
from .errors import error_response
from .state import ServerState
from .streaming import EventStream, watch_disconnect

OFFLOAD_BYTES = 64 << 10  # bodies above this are parsed, templated and tokenized off the event loop
_PHASE = PHASE_HEADER.lower().encode()


def header(scope: dict, name: bytes) -> str | None:
    """The first value of header `name` (lower case), as Starlette's `Headers.get` gives it."""
    for k, v in scope["headers"]:
        if k == name:
            return v.decode("latin-1")
    return None


async def _prepare(
    state: ServerState, handler: ResponsesHandler, body: bytes, rid: str, rec: TimingRecord
) -> Prepared:
    """Parse, template and tokenize the request (a large one on the prepare pool)."""

    def prepare() -> Prepared:
        req = parse_request(body)
        rec.stream = bool(req.stream)
        stateful.no_store(req)
        return handler.prepare(req, rid, rec)

    if len(body) > OFFLOAD_BYTES:
        return await asyncio.get_running_loop().run_in_executor(state.prep_pool, prepare)
    return prepare()


async def _prepare_turn(
    state: ServerState, handler: ResponsesHandler, body: bytes, rid: str, rec: TimingRecord, owner
) -> tuple[Prepared, stateful.Turn | None]:
    """With a store: parse, then load what the request inherits (a worker thread), then prepare
    the stateless request it amounts to (a large one on the prepare pool)."""
    big = len(body) > OFFLOAD_BYTES
    loop = asyncio.get_running_loop()

    async def off(fn, *args):
        return await loop.run_in_executor(state.prep_pool, fn, *args) if big else fn(*args)

    req = await off(parse_request, body)
    rec.stream = bool(req.stream)
    turn = stateful.turn_of(state.response_store, req, owner)
    if turn is None:
        return await off(handler.prepare, req, rid, rec), None
    await stateful.load(turn, rec)
    return await off(stateful.prepare, turn, lambda r: handler.prepare(r, rid, rec)), turn


async def _answer(
    state: ServerState,
    handler: ResponsesHandler,
    p: Prepared,
    receive,
    admitted: bool,
    turn: stateful.Turn | None = None,
) -> Response:
    """The event stream, or the whole Response once the Task is done (a client that leaves first
    cancels the Task request). A stateful `turn` stores the response before its completion."""
    rec = p.record
    if p.req.stream:
        batches = handler.stream_batches(p)
        if turn is not None:
            batches = StoredStream(batches, turn, rec, lambda: p.abandoned)
        return EventStream(
            batches,
            lambda: handler.abandon(p.response_id),
            lambda sent_ns: state.finish(rec, 200, admitted, sent_ns),
        )
    work = asyncio.ensure_future(
        handler.create_response(p.req, p.record.request_id, rec, prepared=p)
    )
    watcher = watch_disconnect(receive, lambda: handler.abandon(p.response_id))
    try:
        resp = await work
    finally:
        watcher.cancel()
    if turn is not None:
        resp = await stateful.write(turn, resp, rec)
    return Response(
        resp.__pydantic_serializer__.to_json(resp),
        media_type="application/json",
        background=BackgroundTask(state.finish, rec, 200, admitted),
    )


def _refused(
    state: ServerState, e: ApiError, rec: TimingRecord, rid: str, admitted: bool
) -> Response:
    """An ApiError as the answer (recorded as a rejection or a failure); nothing for a client
    that left."""
    if rec.status == "cancelled":  # the client left; nobody reads this answer
        state.finish(rec, 499, admitted)
        return Response(status_code=499)
    if e.status < 500 or e.code == "model_not_ready":
        rec.reject(e.status, e.message)
    else:
        rec.fail(e.message, e.status)
    e.message = f"{e.message} (request id {rid})" if rid not in e.message else e.message
    return error_response(e, BackgroundTask(state.finish, rec, e.status, admitted))


class ResponsesEndpoint:
    """The ASGI app of POST /v1/responses (behind RequestIdMiddleware, which sets the request id and
    the arrival time in `scope["state"]`)."""

    def __init__(self, state: ServerState, max_body_bytes: int):
        self.state, self.max_body_bytes = state, max_body_bytes

    async def __call__(self, scope, receive, send) -> None:
        response = await self._respond(scope, receive)
        await response(scope, receive, send)

    async def _respond(self, scope, receive) -> Response:
        state = self.state
        rid, received_ns = scope["state"]["request_id"], scope["state"]["received_ns"]
        rec = state.store.add(
            new_record(rid, new_id("resp"), header(scope, _PHASE), None, received_ns)
        )
        admitted = False
        try:
            handler = state.ready_handler()
            state.admission.enter()
            admitted = True
            check_content_type(header(scope, b"content-type"))
            body = await read_body(header(scope, b"content-length"), receive, self.max_body_bytes)
            turn = None
            if state.response_store is None:
                p = await _prepare(state, handler, body, rid, rec)
            else:
                owner = scope["state"].get("owner", ANONYMOUS)
                p, turn = await _prepare_turn(state, handler, body, rid, rec, owner)
            state.ready_handler()
            return await _answer(state, handler, p, receive, admitted, turn)
        except ApiError as e:
            return _refused(state, e, rec, rid, admitted)
        except ClientLeft:  # gone before its body was in: nothing to answer, nothing ran
            rec.cancel()
            state.finish(rec, 499, admitted)
            return Response(status_code=499)
        except BaseException as e:
            rec.fail(f"{type(e).__name__}: {e}", 500)
            state.finish(rec, 500, admitted)
            raise


class DirectRoutes:
    """Pure ASGI: requests for one of `routes` ((method, path) -> ASGI app) go straight to it; all
    others to the app behind (FastAPI, which also lists those routes, so that another method on one
    of their paths still gets its 405)."""

    def __init__(self, app, routes: dict[tuple[str, str], object]):
        self.app, self.routes = app, routes

    async def __call__(self, scope, receive, send) -> None:
        if (
            scope["type"] == "http"
            and (direct := self.routes.get((scope["method"], scope["path"]))) is not None
        ):
            return await direct(scope, receive, send)
        return await self.app(scope, receive, send)
