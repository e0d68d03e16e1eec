"""The records the store keeps and returns: frozen dataclasses, JSON objects held as dicts."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any, Literal

ItemKind = Literal["input", "output"]
Order = Literal["asc", "desc"]
JSON = dict[str, Any]

ANONYMOUS = "anonymous"  # the owner of everything stored by a server that takes no API key


def owner_of(api_key: str | None) -> str:
    """The owner of objects created with this API key: a hash of it (the key itself is never
    stored), or ANONYMOUS when the request carried none."""
    if not api_key:
        return ANONYMOUS
    return "key-sha256:" + hashlib.sha256(api_key.encode()).hexdigest()


def new_id(prefix: str) -> str:
    """A fresh object id, `<prefix>_` + 48 hex digits (OpenAI's shape: resp_…, conv_…, msg_…)."""
    return f"{prefix}_{secrets.token_hex(24)}"


@dataclass(frozen=True)
class StoredItem:
    """One item of a stored response, at its position (inputs first, then outputs, from 0)."""

    response_id: str
    position: int
    kind: ItemKind
    item_id: str
    type: str
    item: JSON


@dataclass(frozen=True)
class StoredResponse:
    """A finished response as stored: `response` is its whole JSON object."""

    id: str
    owner: str
    created_at: float
    model: str
    status: str
    response: JSON
    previous_response_id: str | None = None
    conversation_id: str | None = None


@dataclass(frozen=True)
class Chain:
    """The responses of a `previous_response_id` chain, oldest first, and their items in order
    (each response's inputs, then its outputs): the context of a follow-up request."""

    responses: tuple[StoredResponse, ...]
    items: tuple[StoredItem, ...]

    def context(self) -> list[JSON]:
        """The items' JSON in order, every type kept (messages, reasoning, function calls,
        outputs)."""
        return [i.item for i in self.items]


@dataclass(frozen=True)
class Conversation:
    id: str
    owner: str
    created_at: float
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ConversationItem:
    conversation_id: str
    position: int
    item_id: str
    type: str
    item: JSON


@dataclass(frozen=True)
class Page:
    """One page of a list, as OpenAI returns it: items, the first and last ids, whether more
    follow."""

    data: tuple[JSON, ...]
    first_id: str | None
    last_id: str | None
    has_more: bool

    def to_json(self) -> JSON:
        return {
            "object": "list",
            "data": list(self.data),
            "first_id": self.first_id,
            "last_id": self.last_id,
            "has_more": self.has_more,
        }
