"""Stored responses in SQL: put (with items, one transaction), get, delete, the previous_response_id
chain (one recursive query) and the input_items pages. Every query is scoped by owner."""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from . import conversations_sql
from .engine import read_tx, write_tx
from .errors import ChainBroken, DuplicateId, NotFound
from .items import dumps, encode
from .paging import page
from .records import JSON, Chain, Order, Page, StoredItem, StoredResponse
from .schema import response_items as ri
from .schema import responses as rs

MAX_CHAIN = 100_000  # a chain deeper than this is reported broken (it can only be a cycle)


def _record(row: sa.Row) -> StoredResponse:
    return StoredResponse(
        id=row.id,
        owner=row.owner,
        created_at=row.created_at,
        model=row.model,
        status=row.status,
        response=json.loads(row.response),
        previous_response_id=row.previous_response_id,
        conversation_id=row.conversation_id,
    )


def put(
    engine: Engine, response: StoredResponse, inputs: Sequence[JSON], outputs: Sequence[JSON]
) -> None:
    with write_tx(engine) as conn:
        insert(conn, response, inputs, outputs)


def insert(
    conn: Connection, response: StoredResponse, inputs: Sequence[JSON], outputs: Sequence[JSON]
) -> None:
    """put's statements, inside the caller's write transaction."""
    if response.previous_response_id == response.id:
        raise ValueError(f"response '{response.id}' cannot follow itself")
    rows = encode([*inputs, *outputs], "items")
    values = [
        {
            "response_id": response.id,
            "position": i,
            "item_id": item_id,
            "type": kind,
            "kind": "input" if i < len(inputs) else "output",
            "item": text,
        }
        for i, (item_id, kind, text) in enumerate(rows)
    ]
    if response.conversation_id is not None:
        conversations_sql.append(conn, response.owner, response.conversation_id, rows)
    try:
        conn.execute(
            rs.insert().values(
                id=response.id,
                owner=response.owner,
                created_at=response.created_at,
                model=response.model,
                status=response.status,
                response=dumps(response.response),
                previous_response_id=response.previous_response_id,
                conversation_id=response.conversation_id,
            )
        )
    except IntegrityError:
        raise DuplicateId("Response", response.id) from None
    if values:
        conn.execute(ri.insert(), values)


def get(engine: Engine, owner: str, response_id: str) -> StoredResponse:
    with read_tx(engine) as conn:
        row = conn.execute(sa.select(rs).where(rs.c.id == response_id, rs.c.owner == owner)).first()
    if row is None:
        raise NotFound("Response", response_id)
    return _record(row)


def delete(engine: Engine, owner: str, response_id: str) -> None:
    with write_tx(engine) as conn:
        if (
            conn.execute(rs.delete().where(rs.c.id == response_id, rs.c.owner == owner)).rowcount
            == 0
        ):
            raise NotFound("Response", response_id)


def _chain_cte(owner: str, head: str) -> sa.CTE:
    """(id, depth) of the chain ending at `head`: depth 0 is head, each step one response back."""
    base = (
        sa.select(rs.c.id, rs.c.previous_response_id, sa.literal(0, sa.Integer).label("depth"))
        .where(rs.c.id == head, rs.c.owner == owner)
        .cte("chain", recursive=True)
    )
    step = sa.select(rs.c.id, rs.c.previous_response_id, (base.c.depth + 1).label("depth")).where(
        rs.c.id == base.c.previous_response_id, rs.c.owner == owner, base.c.depth < MAX_CHAIN
    )
    return base.union_all(step)


def chain(engine: Engine, owner: str, response_id: str) -> Chain:
    cte = _chain_cte(owner, response_id)
    with read_tx(engine) as conn:
        rows = conn.execute(
            sa.select(rs).join(cte, cte.c.id == rs.c.id).order_by(cte.c.depth.desc())
        ).all()
        if not rows:
            raise NotFound("Response", response_id)
        if rows[0].previous_response_id is not None:
            raise ChainBroken(response_id, rows[0].previous_response_id)
        items = conn.execute(
            sa.select(ri)
            .join(cte, cte.c.id == ri.c.response_id)
            .order_by(cte.c.depth.desc(), ri.c.position)
        ).all()
    return Chain(
        responses=tuple(_record(r) for r in rows),
        items=tuple(
            StoredItem(
                response_id=i.response_id,
                position=i.position,
                kind=i.kind,
                item_id=i.item_id,
                type=i.type,
                item=json.loads(i.item),
            )
            for i in items
        ),
    )


def input_items(
    engine: Engine, owner: str, response_id: str, *, after: str | None, limit: int, order: Order
) -> Page:
    with read_tx(engine) as conn:
        found = conn.execute(
            sa.select(rs.c.id).where(rs.c.id == response_id, rs.c.owner == owner)
        ).first()
        if found is None:
            raise NotFound("Response", response_id)
        return page(
            conn,
            ri,
            sa.and_(ri.c.response_id == response_id, ri.c.kind == "input"),
            after=after,
            limit=limit,
            order=order,
        )
