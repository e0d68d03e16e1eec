"""OpenAI's list pagination (`after`, `limit`, `order`) over items kept by position, paged in SQL:
one query reads at most limit + 1 rows past the cursor, the extra row only telling whether more
follow."""

from __future__ import annotations

import json

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .errors import InvalidPage
from .interface import MAX_LIMIT
from .records import Page


def check_page(limit: int, order: str) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidPage(
            "limit", f"Invalid 'limit': {limit!r}. Expected an integer from 1 to {MAX_LIMIT}."
        )
    if order not in ("asc", "desc"):
        raise InvalidPage("order", f"Invalid 'order': {order!r}. Expected 'asc' or 'desc'.")


def page(
    conn: Connection,
    table: sa.Table,
    where: sa.ColumnElement[bool],
    *,
    after: str | None,
    limit: int,
    order: str,
) -> Page:
    """A page of `table`'s rows matching `where` (one parent's items), ordered by position. The
    `after` cursor is an item id among them (InvalidPage if it is not)."""
    check_page(limit, order)
    position = table.c.position
    query = sa.select(table.c.item_id, table.c.item).where(where)
    if after is not None:
        cursor = sa.select(position).where(where, table.c.item_id == after).scalar_subquery()
        found = conn.execute(sa.select(sa.exists().where(where, table.c.item_id == after))).scalar()
        if not found:
            raise InvalidPage("after", f"Invalid 'after': no item with id '{after}' in this list.")
        query = query.where(position > cursor if order == "asc" else position < cursor)
    query = query.order_by(position.asc() if order == "asc" else position.desc()).limit(limit + 1)
    rows = conn.execute(query).all()
    kept = rows[:limit]
    return Page(
        data=tuple(json.loads(r.item) for r in kept),
        first_id=kept[0].item_id if kept else None,
        last_id=kept[-1].item_id if kept else None,
        has_more=len(rows) > limit,
    )
