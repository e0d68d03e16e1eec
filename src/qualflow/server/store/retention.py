"""Retention: delete stored responses by age and beyond a count, a bounded batch per transaction,
and the background task that does it periodically. Conversations are kept until deleted (as OpenAI's
are); a response stored in a conversation is pruned like any other, its conversation's items
stay."""

from __future__ import annotations

import asyncio
import logging
import time

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .config import StoreConfig
from .engine import write_tx
from .interface import ResponseStore
from .schema import responses as rs

log = logging.getLogger(__name__)


def prune(
    engine: Engine, *, now: float, max_age_s: float | None, max_responses: int | None, batch: int
) -> int:
    """Delete (with their items) at most `batch` responses older than now - max_age_s, then at most
    `batch` of those beyond the newest max_responses; the number deleted. The count bound reads the
    created_at index from the newest down (no count of the table)."""
    if batch < 1:
        raise ValueError(f"batch must be at least 1, not {batch}")
    deleted = 0
    with write_tx(engine) as conn:
        if max_age_s is not None:
            old = (
                sa.select(rs.c.id)
                .where(rs.c.created_at < now - max_age_s)
                .order_by(rs.c.created_at)
                .limit(batch)
            )
            deleted += conn.execute(rs.delete().where(rs.c.id.in_(old))).rowcount
        if max_responses is not None:
            excess = (
                sa.select(rs.c.id)
                .order_by(rs.c.created_at.desc(), rs.c.id.desc())
                .limit(batch)
                .offset(max_responses)
            )
            deleted += conn.execute(rs.delete().where(rs.c.id.in_(excess))).rowcount
    return deleted


def prune_once(store: ResponseStore, config: StoreConfig, now: float | None = None) -> int:
    """One pass of the config's retention: batches until nothing is left to delete; the total."""
    total = 0
    while True:
        n = store.prune(
            now=time.time() if now is None else now,
            max_age_s=config.max_age_s,
            max_responses=config.max_responses,
            batch=config.prune_batch,
        )
        total += n
        if n < config.prune_batch:
            return total


async def retain(store: ResponseStore, config: StoreConfig, stop: asyncio.Event) -> None:
    """The background task: a retention pass every prune_interval_s, each batch on a worker thread
    (the event loop never waits on the database), until `stop` is set. A failed pass is logged and
    retried at the next interval."""
    while not stop.is_set():
        try:
            n = await asyncio.to_thread(prune_once, store, config)
            if n:
                log.info("response store: pruned %d responses", n)
        except Exception:
            log.exception("response store: retention pass failed")
        try:
            await asyncio.wait_for(stop.wait(), timeout=config.prune_interval_s)
        except TimeoutError:
            pass
