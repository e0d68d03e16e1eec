"""The server's OpenAPI 3.1 document (GET /openapi.json): every route the app serves, the raw
POST /v1/responses endpoint included, with its request model (protocol.requests.CreateResponse),
its response models (protocol.responses.Response, or an event stream) and its errors in OpenAI's
shape. Built on first request from the app's routes, so that a stateful app documents its stored
object routes and an app with API keys its Bearer scheme."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic.json_schema import models_json_schema

from ..protocol.requests import CreateResponse
from ..protocol.responses import Response
from ..store import MAX_LIMIT
from .auth import ApiKeyMiddleware
from .openapi_schemas import (
    CONVERSATION,
    CONVERSATION_BODY,
    ERROR,
    FUNCTION_TOOL,
    HEALTH,
    ITEMS_BODY,
    METADATA_BODY,
    MODELS,
    PAGE,
    REF,
    TIMINGS,
    deleted,
)
from .responses_endpoint import DirectRoutes


def _ref(name: str) -> dict:
    return {"$ref": REF.format(model=name)}


def _json(schema: dict) -> dict:
    return {"application/json": {"schema": schema}}


def _query(**schemas: dict) -> list[dict]:
    return [{"name": n, "in": "query", "required": False, "schema": v} for n, v in schemas.items()]


_STR, _INT = {"type": "string"}, {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}


def _path(*names: str) -> list[dict]:
    return [
        {"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in names
    ]


_PAGING = _query(
    after={"type": "string", "minLength": 1},
    limit={"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
    order={"enum": ["asc", "desc"]},
)
_WHY = {
    400: "The request is invalid.",
    401: "No API key, or not one of the server's.",
    404: "No such object (or another key's).",
    413: "The body is over the server's limit.",
    415: "The body is not JSON.",
    429: "The server is at its admission limit; retry after `retry-after` seconds.",
    500: "The server failed to answer.",
    503: "The model is not loaded yet, or the engine failed.",
}


def _op(op_id: str, ok: dict, errors: tuple[int, ...], params=(), body=None, stream=False) -> dict:
    content = _json(ok)
    if stream:
        content["text/event-stream"] = {
            "schema": {"type": "string", "description": "Server-sent Responses events."}
        }
    responses = {"200": {"description": "OK", "content": content}}
    for status in errors:
        responses[str(status)] = {"description": _WHY[status], "content": _json(_ref("Error"))}
    op: dict[str, Any] = {"operationId": op_id, "responses": responses}
    if params:
        op["parameters"] = list(params)
    if body is not None:
        op["requestBody"] = {
            "required": body is ITEMS_BODY or "$ref" in body,
            "content": _json(body),
        }
    return op


def _operations() -> dict[tuple[str, str], dict]:
    resp, conv, conv_path = (
        "/v1/responses",
        "/v1/conversations",
        "/v1/conversations/{conversation_id}",
    )
    by_id, item = resp + "/{response_id}", conv_path + "/items/{item_id}"
    return {
        ("GET", "/health"): _op("health", _ref("Health"), (503,)),
        ("GET", "/openapi.json"): _op("openapi", {"type": "object"}, ()),
        ("GET", "/v1/models"): _op("listModels", MODELS, (503,)),
        ("GET", "/v1/qualflow/task-timings"): _op(
            "taskTimings",
            TIMINGS,
            (400,),
            _query(
                request_ids=_STR,
                since_ns=_INT,
                tag=_STR,
                after=_INT,
                limit={"type": "integer", "minimum": 1, "maximum": 10_000},
            ),
        ),
        ("POST", resp): _op(
            "createResponse",
            _ref("Response"),
            (400, 404, 413, 415, 429, 500, 503),
            body=_ref("CreateResponse"),
            stream=True,
        ),
        ("GET", by_id): _op(
            "getResponse",
            _ref("Response"),
            (400, 404),
            [*_path("response_id"), *_query(stream={"enum": ["false"]})],
        ),
        ("DELETE", by_id): _op("deleteResponse", deleted("response"), (404,), _path("response_id")),
        ("GET", by_id + "/input_items"): _op(
            "listInputItems", PAGE, (400, 404), [*_path("response_id"), *_PAGING]
        ),
        ("POST", conv): _op("createConversation", CONVERSATION, (400,), body=CONVERSATION_BODY),
        ("GET", conv_path): _op("getConversation", CONVERSATION, (404,), _path("conversation_id")),
        ("POST", conv_path): _op(
            "updateConversation",
            CONVERSATION,
            (400, 404),
            _path("conversation_id"),
            body=METADATA_BODY,
        ),
        ("DELETE", conv_path): _op(
            "deleteConversation", deleted("conversation"), (404,), _path("conversation_id")
        ),
        ("GET", conv_path + "/items"): _op(
            "listItems", PAGE, (400, 404), [*_path("conversation_id"), *_PAGING]
        ),
        ("POST", conv_path + "/items"): _op(
            "addItems", PAGE, (400, 404), _path("conversation_id"), body=ITEMS_BODY
        ),
        ("GET", item): _op(
            "getItem", {"type": "object"}, (404,), _path("conversation_id", "item_id")
        ),
        ("DELETE", item): _op(
            "deleteItem", CONVERSATION, (404,), _path("conversation_id", "item_id")
        ),
    }


def served_routes(app: FastAPI) -> set[tuple[str, str]]:
    """(method, path) of every route `app` answers: its router's and DirectRoutes' (HEAD and
    OPTIONS, which Starlette adds to GET routes, left out)."""
    out = {
        (m, r.path)
        for r in app.routes
        for m in (getattr(r, "methods", None) or ())
        if m not in ("HEAD", "OPTIONS")
    }
    for mw in app.user_middleware:
        if mw.cls is DirectRoutes:
            out |= set(mw.kwargs["routes"])
    return out


def _components() -> dict:
    _, defs = models_json_schema(
        [(CreateResponse, "validation"), (Response, "serialization")], ref_template=REF
    )
    schemas = defs["$defs"]
    request = schemas["CreateResponse"]  # the handler requires model and input
    request["required"] = ["model", "input"]
    request["properties"]["model"] = {"type": "string", "maxLength": 256}
    request["properties"]["input"] = {"anyOf": [{"type": "string"}, {"type": "array"}]}
    request["properties"]["tools"] = {
        "anyOf": [{"type": "array", "items": _ref("FunctionTool")}, {"type": "null"}]
    }
    schemas.update(FunctionTool=FUNCTION_TOOL, Error=ERROR, Health=HEALTH)
    return {"schemas": schemas}


def openapi_document(app: FastAPI) -> dict:
    """The document of `app` as it is now assembled (routes, middleware)."""
    keys = any(mw.cls is ApiKeyMiddleware for mw in app.user_middleware)
    ops, paths = _operations(), {}
    for method, path in sorted(served_routes(app)):
        op = ops.get((method, path))
        if op is None:  # not documented: tests/server/test_openapi.py catches it
            continue
        if keys and path.startswith("/v1/"):
            op["security"] = [{"bearer": []}]
            op["responses"]["401"] = {"description": _WHY[401], "content": _json(_ref("Error"))}
        paths.setdefault(path, {})[method.lower()] = op
    components = _components()
    if keys:
        components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    return {
        "openapi": "3.1.0",
        "info": {"title": app.title, "version": app.version},
        "paths": paths,
        "components": components,
    }


def add_openapi(app: FastAPI) -> None:
    """Serve the document at /openapi.json (open, as /health is), built once on first request."""

    def openapi() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = openapi_document(app)
        return app.openapi_schema

    app.openapi = openapi
