"""The routes of stored objects (a server with --store): GET and DELETE /v1/responses/{id}, its
input_items, and the conversations with their items, in OpenAI's shapes. Every call is scoped to
the caller's owner (auth: its API key) and runs on a worker thread (AsyncStore); an unknown id, a
deleted one and another key's all get the same 404."""

from __future__ import annotations

import time
from typing import Any

import orjson
from fastapi import FastAPI, Request

from ..protocol.errors import ApiError, bad_request
from ..stateful import own_items
from ..store import ANONYMOUS, Conversation, DuplicateId, InvalidPage, NotFound, new_id
from ..store.interface import DEFAULT_LIMIT
from .routes import _int
from .state import ServerState

MAX_NEW_ITEMS = 20  # items per conversation create or add call, as OpenAI's


def _owner(request: Request) -> str:
    return request.scope.get("state", {}).get("owner", ANONYMOUS)


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = orjson.loads(raw) if raw else {}
    except ValueError as e:
        raise bad_request(
            f"We could not parse the JSON body ({e}).", None, "invalid_json"
        ) from None
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.", None, "invalid_json")
    return body


async def _call(coro):
    """The store call's result; its errors in OpenAI's shapes."""
    try:
        return await coro
    except NotFound as e:
        raise ApiError(404, str(e)) from None
    except InvalidPage as e:
        raise bad_request(str(e), e.param, "invalid_value") from None
    except (DuplicateId, ValueError) as e:
        raise bad_request(str(e), "items", "invalid_value") from None


def _page_args(limit: str | None, order: str | None, after: str | None) -> dict:
    n = _int("limit", limit, DEFAULT_LIMIT)
    if order not in (None, "asc", "desc"):
        raise bad_request(
            f"Invalid value for 'order': {order!r}; expected 'asc' or 'desc'.",
            "order",
            "invalid_value",
        )
    return {"after": after, "limit": n, "order": order or "desc"}


def _metadata(body: dict) -> dict[str, str]:
    md = body.get("metadata")
    md = {} if md is None else md  # false, 0, "" are not metadata
    ok = isinstance(md, dict) and len(md) <= 16
    if not ok or any(not isinstance(v, str) or len(k) > 64 or len(v) > 512 for k, v in md.items()):
        raise bad_request(
            "Invalid 'metadata': at most 16 string values, keys up to 64 and values up to 512 "
            "characters.",
            "metadata",
            "invalid_value",
        )
    return md


def _items(body: dict, required: bool) -> list[dict]:
    items = body.get("items")
    if items is None and not required:
        return []
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise bad_request(
            "Invalid 'items': expected a list of item objects.", "items", "invalid_type"
        )
    if not 0 < len(items) <= MAX_NEW_ITEMS and (required or items):
        raise bad_request(
            f"Invalid 'items': expected 1 to {MAX_NEW_ITEMS} items.", "items", "invalid_value"
        )
    return own_items(items)


def _conversation(c: Conversation) -> dict:
    return {
        "id": c.id,
        "object": "conversation",
        "created_at": int(c.created_at),
        "metadata": c.metadata,
    }


def add_response_routes(app: FastAPI, state: ServerState) -> None:
    store = state.response_store

    @app.get("/v1/responses/{response_id}")
    async def get_response(response_id: str, request: Request, stream: str | None = None):
        if stream not in (None, "false"):
            raise bad_request(
                "Unsupported value: 'stream' must be false: a stored response is retrieved whole.",
                "stream",
                "unsupported_value",
            )
        stored = await _call(store.get(_owner(request), response_id))
        return stored.response

    @app.delete("/v1/responses/{response_id}")
    async def delete_response(response_id: str, request: Request):
        await _call(store.delete(_owner(request), response_id))
        return {"id": response_id, "object": "response.deleted", "deleted": True}

    @app.get("/v1/responses/{response_id}/input_items")
    async def input_items(
        response_id: str,
        request: Request,
        after: str | None = None,
        limit: str | None = None,
        order: str | None = None,
    ):
        args = _page_args(limit, order, after)
        page = await _call(store.input_items(_owner(request), response_id, **args))
        return page.to_json()


def add_conversation_routes(app: FastAPI, state: ServerState) -> None:
    store = state.response_store

    @app.post("/v1/conversations")
    async def create(request: Request):
        body = await _body(request)
        conv = Conversation(new_id("conv"), _owner(request), time.time(), _metadata(body))
        await _call(store.create_conversation(conv, _items(body, required=False)))
        return _conversation(conv)

    @app.get("/v1/conversations/{conversation_id}")
    async def retrieve(conversation_id: str, request: Request):
        return _conversation(await _call(store.get_conversation(_owner(request), conversation_id)))

    @app.post("/v1/conversations/{conversation_id}")
    async def update(conversation_id: str, request: Request):
        md = _metadata(await _body(request))
        conv = await _call(store.update_conversation(_owner(request), conversation_id, md))
        return _conversation(conv)

    @app.delete("/v1/conversations/{conversation_id}")
    async def delete(conversation_id: str, request: Request):
        await _call(store.delete_conversation(_owner(request), conversation_id))
        return {"id": conversation_id, "object": "conversation.deleted", "deleted": True}

    @app.get("/v1/conversations/{conversation_id}/items")
    async def list_items(
        conversation_id: str,
        request: Request,
        after: str | None = None,
        limit: str | None = None,
        order: str | None = None,
    ):
        args = _page_args(limit, order, after)
        page = await _call(store.list_items(_owner(request), conversation_id, **args))
        return page.to_json()

    @app.post("/v1/conversations/{conversation_id}/items")
    async def add_items(conversation_id: str, request: Request):
        items = _items(await _body(request), required=True)
        added = await _call(store.add_items(_owner(request), conversation_id, items))
        data = [i.item for i in added]
        return {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": False,
        }

    @app.get("/v1/conversations/{conversation_id}/items/{item_id}")
    async def get_item(conversation_id: str, item_id: str, request: Request):
        return await _call(store.get_item(_owner(request), conversation_id, item_id))

    @app.delete("/v1/conversations/{conversation_id}/items/{item_id}")
    async def delete_item(conversation_id: str, item_id: str, request: Request):
        owner = _owner(request)
        await _call(store.delete_item(owner, conversation_id, item_id))
        return _conversation(await _call(store.get_conversation(owner, conversation_id)))
