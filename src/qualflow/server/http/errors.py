"""ApiError rendered as OpenAI's error body, and the app's handlers that turn FastAPI's own errors
(validation, 404, 405) into that shape."""

from __future__ import annotations

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.routing import Match

from ..protocol.errors import ApiError


def error_response(e: ApiError, background: BackgroundTask | None = None) -> Response:
    headers = e.headers()
    if e.status == 413:
        headers["connection"] = "close"  # the rest of the body is not read
    return Response(
        orjson.dumps(e.body()),
        status_code=e.status,
        headers=headers,
        media_type="application/json",
        background=background,
    )


def _allowed(request: Request) -> list[str]:
    """The methods some route of the app serves at the request's path (RFC 9110's Allow)."""
    methods = set()
    for route in request.app.router.routes:
        if getattr(route, "methods", None) and route.matches(request.scope)[0] != Match.NONE:
            methods |= route.methods
    return sorted(methods)


def add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def on_api_error(request: Request, e: ApiError):
        return error_response(e)

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, e: RequestValidationError):
        err = e.errors()[0]
        param = ".".join(str(p) for p in err["loc"][1:]) or None
        return error_response(
            ApiError(400, f"Invalid request: {err['msg']}.", param=param, code="invalid_type")
        )

    @app.exception_handler(HTTPException)
    async def on_http_error(request: Request, e: HTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(e.status_code, "http_error")
        response = error_response(
            ApiError(
                e.status_code,
                f"{e.detail}: {request.method} {request.url.path}",
                param=None,
                code=code,
            )
        )
        response.headers.update(e.headers or {})
        if e.status_code == 405:  # Allow: every method of the path's routes, not one route's
            response.headers["allow"] = ", ".join(_allowed(request))
        return response
