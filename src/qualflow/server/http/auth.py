"""Bearer authentication of every /v1 route, as pure ASGI middleware (so that the raw POST
/v1/responses endpoint is covered too): a request without one of the server's keys gets OpenAI's
401; /health stays open. Every request's owner (store.owner_of its key, or the one anonymous tenant
when the server takes no key) is put in `scope["state"]["owner"]` for the stored-object routes."""

from __future__ import annotations

import orjson

from ..protocol.errors import ApiError
from ..store import ANONYMOUS, owner_of

_MISSING = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header "
    "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
)


def _bearer(scope) -> str | None:
    for k, v in scope["headers"]:
        if k == b"authorization":
            scheme, _, token = v.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


def _masked(key: str) -> str:
    return key[:3] + "*" * 4 + key[-4:] if len(key) > 10 else "*" * len(key)


def unauthorized(key: str | None) -> ApiError:
    if key is None:
        return ApiError(401, _MISSING, "invalid_request_error", None, None)
    return ApiError(
        401,
        f"Incorrect API key provided: {_masked(key)}.",
        "invalid_request_error",
        None,
        "invalid_api_key",
    )


class ApiKeyMiddleware:
    """Checks the key of every /v1 request against `keys` (none: everyone is the one tenant)."""

    def __init__(self, app, keys: frozenset[str] = frozenset()):
        self.app, self.keys = app, keys

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        state = scope.setdefault("state", {})
        if not self.keys:
            state["owner"] = ANONYMOUS
            return await self.app(scope, receive, send)
        key = _bearer(scope)
        path = scope["path"]
        if key in self.keys:
            state["owner"] = owner_of(key)
        elif path == "/v1" or path.startswith("/v1/"):
            err = unauthorized(key)
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b"Bearer"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": orjson.dumps(err.body())})
            return None
        return await self.app(scope, receive, send)
