"""SqlStore: the ResponseStore on a SQLAlchemy engine (SQLite or PostgreSQL), and open_store, which
opens and migrates one."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.engine import Engine

from . import conversations_sql, responses_sql, retention
from .engine import open_engine
from .group_commit import GroupCommit
from .interface import DEFAULT_LIMIT
from .migrations import migrate
from .records import JSON, Chain, Conversation, ConversationItem, Order, Page, StoredResponse


class SqlStore:
    """The response store on a database (see ResponseStore for each method). Thread-safe: each call
    takes a pooled connection for one transaction."""

    def __init__(self, engine: Engine):
        self.engine = engine
        # SQLite: one writer at a time anyway, so concurrent puts share commits (group_commit.py);
        # PostgreSQL writes them in parallel and groups their WAL flushes itself
        self._group = GroupCommit(engine) if engine.dialect.name == "sqlite" else None

    def put(
        self, response: StoredResponse, inputs: Sequence[JSON], outputs: Sequence[JSON]
    ) -> None:
        if self._group is not None:
            self._group.put(response, inputs, outputs)
        else:
            responses_sql.put(self.engine, response, inputs, outputs)

    def get(self, owner: str, response_id: str) -> StoredResponse:
        return responses_sql.get(self.engine, owner, response_id)

    def delete(self, owner: str, response_id: str) -> None:
        responses_sql.delete(self.engine, owner, response_id)

    def chain(self, owner: str, response_id: str) -> Chain:
        return responses_sql.chain(self.engine, owner, response_id)

    def input_items(
        self,
        owner: str,
        response_id: str,
        *,
        after: str | None = None,
        limit: int = DEFAULT_LIMIT,
        order: Order = "desc",
    ) -> Page:
        return responses_sql.input_items(
            self.engine, owner, response_id, after=after, limit=limit, order=order
        )

    def create_conversation(self, conversation: Conversation, items: Sequence[JSON] = ()) -> None:
        conversations_sql.create(self.engine, conversation, items)

    def get_conversation(self, owner: str, conversation_id: str) -> Conversation:
        return conversations_sql.get(self.engine, owner, conversation_id)

    def update_conversation(
        self, owner: str, conversation_id: str, metadata: dict[str, str]
    ) -> Conversation:
        return conversations_sql.update(self.engine, owner, conversation_id, metadata)

    def delete_conversation(self, owner: str, conversation_id: str) -> None:
        conversations_sql.delete(self.engine, owner, conversation_id)

    def add_items(
        self, owner: str, conversation_id: str, items: Sequence[JSON]
    ) -> tuple[ConversationItem, ...]:
        return conversations_sql.add(self.engine, owner, conversation_id, items)

    def list_items(
        self,
        owner: str,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int = DEFAULT_LIMIT,
        order: Order = "desc",
    ) -> Page:
        return conversations_sql.list_page(
            self.engine, owner, conversation_id, after=after, limit=limit, order=order
        )

    def get_item(self, owner: str, conversation_id: str, item_id: str) -> JSON:
        return conversations_sql.get_item(self.engine, owner, conversation_id, item_id)

    def delete_item(self, owner: str, conversation_id: str, item_id: str) -> None:
        conversations_sql.delete_item(self.engine, owner, conversation_id, item_id)

    def prune(
        self, *, now: float, max_age_s: float | None, max_responses: int | None, batch: int
    ) -> int:
        return retention.prune(
            self.engine, now=now, max_age_s=max_age_s, max_responses=max_responses, batch=batch
        )

    def close(self) -> None:
        self.engine.dispose()


def open_store(url: str) -> SqlStore:
    """Open the store at `url` (a SQLite file path, sqlite:///PATH or postgresql://…) and migrate
    its schema to the newest version. StoreOpenError, naming the URL without its password, if it
    cannot."""
    engine = open_engine(url)
    try:
        migrate(engine)
    except Exception:
        engine.dispose()
        raise
    return SqlStore(engine)
