"""Checking and encoding items before they are stored: each a JSON object with a string `id` and
`type`, ids unique within what one call stores."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .errors import DuplicateId
from .records import JSON


def dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def encode(items: Sequence[JSON], what: str) -> list[tuple[str, str, str]]:
    """(item_id, type, JSON text) of each item; ValueError naming the item (`what[i]`) if it has no
    string id or type, DuplicateId if two share an id."""
    out, seen = [], set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"{what}[{i}] is not a JSON object")
        item_id, kind = item.get("id"), item.get("type")
        if not isinstance(item_id, str) or not item_id:
            raise ValueError(f"{what}[{i}] has no id (the server assigns one before storing it)")
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"{what}[{i}] has no type")
        if item_id in seen:
            raise DuplicateId("item", item_id)
        seen.add(item_id)
        out.append((item_id, kind, dumps(item)))
    return out
