"""Conversations and their items in SQL: create, retrieve, update, delete; append, list, get and
delete items. Every query is scoped by owner; another owner's conversation is NotFound."""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .engine import read_tx, write_tx
from .errors import DuplicateId, NotFound
from .items import dumps, encode
from .paging import page
from .records import JSON, Conversation, ConversationItem, Order, Page
from .schema import conversation_items as ci
from .schema import conversations as cv


def _row(conn: Connection, owner: str, conversation_id: str, *, lock: bool = False) -> sa.Row:
    q = sa.select(cv).where(cv.c.id == conversation_id, cv.c.owner == owner)
    row = conn.execute(q.with_for_update() if lock else q).first()
    if row is None:
        raise NotFound("Conversation", conversation_id)
    return row


def _record(row: sa.Row) -> Conversation:
    return Conversation(
        id=row.id, owner=row.owner, created_at=row.created_at, metadata=json.loads(row.metadata)
    )


def append(
    conn: Connection, owner: str, conversation_id: str, rows: list[tuple[str, str, str]]
) -> tuple[ConversationItem, ...]:
    """Append encoded items (items.encode) to the owner's conversation, inside the caller's write
    transaction: the conversation row is locked, so concurrent appends get distinct positions."""
    _row(conn, owner, conversation_id, lock=True)
    if not rows:
        return ()
    ids = [r[0] for r in rows]
    taken = conn.execute(
        sa.select(ci.c.item_id)
        .where(ci.c.conversation_id == conversation_id, ci.c.item_id.in_(ids))
        .limit(1)
    ).scalar()
    if taken is not None:
        raise DuplicateId("item", taken)
    start = conn.execute(
        sa.select(sa.func.coalesce(sa.func.max(ci.c.position) + 1, 0)).where(
            ci.c.conversation_id == conversation_id
        )
    ).scalar()
    values = [
        {
            "conversation_id": conversation_id,
            "position": start + i,
            "item_id": item_id,
            "type": kind,
            "item": text,
        }
        for i, (item_id, kind, text) in enumerate(rows)
    ]
    conn.execute(ci.insert(), values)
    return tuple(
        ConversationItem(
            conversation_id, v["position"], v["item_id"], v["type"], json.loads(v["item"])
        )
        for v in values
    )


def create(engine: Engine, conversation: Conversation, items: Sequence[JSON]) -> None:
    rows = encode(items, "items")
    with write_tx(engine) as conn:
        if conn.execute(sa.select(cv.c.id).where(cv.c.id == conversation.id)).first() is not None:
            raise DuplicateId("Conversation", conversation.id)
        conn.execute(
            cv.insert().values(
                id=conversation.id,
                owner=conversation.owner,
                created_at=conversation.created_at,
                metadata=dumps(conversation.metadata),
            )
        )
        append(conn, conversation.owner, conversation.id, rows)


def get(engine: Engine, owner: str, conversation_id: str) -> Conversation:
    with read_tx(engine) as conn:
        return _record(_row(conn, owner, conversation_id))


def update(
    engine: Engine, owner: str, conversation_id: str, metadata: dict[str, str]
) -> Conversation:
    with write_tx(engine) as conn:
        row = _row(conn, owner, conversation_id, lock=True)
        conn.execute(cv.update().where(cv.c.id == conversation_id).values(metadata=dumps(metadata)))
        return Conversation(
            id=row.id, owner=row.owner, created_at=row.created_at, metadata=dict(metadata)
        )


def delete(engine: Engine, owner: str, conversation_id: str) -> None:
    with write_tx(engine) as conn:
        gone = conn.execute(cv.delete().where(cv.c.id == conversation_id, cv.c.owner == owner))
        if gone.rowcount == 0:
            raise NotFound("Conversation", conversation_id)


def add(
    engine: Engine, owner: str, conversation_id: str, items: Sequence[JSON]
) -> tuple[ConversationItem, ...]:
    rows = encode(items, "items")
    with write_tx(engine) as conn:
        return append(conn, owner, conversation_id, rows)


def list_page(
    engine: Engine, owner: str, conversation_id: str, *, after: str | None, limit: int, order: Order
) -> Page:
    with read_tx(engine) as conn:
        _row(conn, owner, conversation_id)
        return page(
            conn, ci, ci.c.conversation_id == conversation_id, after=after, limit=limit, order=order
        )


def get_item(engine: Engine, owner: str, conversation_id: str, item_id: str) -> JSON:
    with read_tx(engine) as conn:
        _row(conn, owner, conversation_id)
        text = conn.execute(
            sa.select(ci.c.item).where(
                ci.c.conversation_id == conversation_id, ci.c.item_id == item_id
            )
        ).scalar()
    if text is None:
        raise NotFound("Item", item_id)
    return json.loads(text)


def delete_item(engine: Engine, owner: str, conversation_id: str, item_id: str) -> None:
    with write_tx(engine) as conn:
        _row(conn, owner, conversation_id, lock=True)
        gone = conn.execute(
            ci.delete().where(ci.c.conversation_id == conversation_id, ci.c.item_id == item_id)
        )
        if gone.rowcount == 0:
            raise NotFound("Item", item_id)
