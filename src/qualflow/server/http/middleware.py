"""Request identity, as pure ASGI middleware: every response carries the request's X-Request-ID, and
an exception nobody handled still becomes an OpenAI-shaped 500."""

from __future__ import annotations

import logging
import re
import time
import uuid

import orjson

from ..protocol.errors import ApiError

log = logging.getLogger("qualflow.server")
_SAFE_ID = re.compile(
    r"^[\x21-\x7e]{1,256}$"
)  # printable ASCII, no spaces: safe to echo in a header
JSON_HEADERS = [(b"content-type", b"application/json")]


class RequestIdMiddleware:
    """Take X-Request-ID (or make one), note the receive time, echo the id on every response.
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
                err = ApiError(
                    500,
                    f"Internal server error: {type(e).__name__} (request id {rid})",
                    "server_error",
                    None,
                    "server_error",
                )
                await send_with_id(
                    {
                        "type": "http.response.start",
                        "status": 500,
                        "headers": [
                            *JSON_HEADERS,
                            *((k.encode(), v.encode()) for k, v in err.headers().items()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": orjson.dumps(err.body())})
