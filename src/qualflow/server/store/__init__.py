"""The response store: stored responses, their items and conversations, owned by API key, on SQLite
(the embedded default: a file, WAL, synchronous=FULL) or PostgreSQL (several servers, one database).

  interface      ResponseStore, the one interface (synchronous)
  records        the typed records (StoredResponse, StoredItem, Chain, Conversation, Page, …)
  errors         the typed errors the HTTP layer renders
  config         StoreConfig
  engine         opening the database (URL parsing, SQLite pragmas, transactions)
  schema         the tables at the current version; migrations: the versions and their steps
  responses_sql, conversations_sql, paging, items: the operations in SQL
  retention      pruning by age and count, and its background task
  sql_store      SqlStore and open_store; async_store: AsyncStore (each call on a worker thread)"""

from __future__ import annotations

from .async_store import AsyncStore
from .config import StoreConfig
from .errors import ChainBroken, DuplicateId, InvalidPage, NotFound, StoreError, StoreOpenError
from .interface import DEFAULT_LIMIT, MAX_LIMIT, ResponseStore
from .records import (
    ANONYMOUS,
    Chain,
    Conversation,
    ConversationItem,
    Page,
    StoredItem,
    StoredResponse,
    new_id,
    owner_of,
)
from .retention import prune_once, retain
from .sql_store import SqlStore, open_store

__all__ = [
    "ANONYMOUS",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "AsyncStore",
    "Chain",
    "ChainBroken",
    "Conversation",
    "ConversationItem",
    "DuplicateId",
    "InvalidPage",
    "NotFound",
    "Page",
    "ResponseStore",
    "SqlStore",
    "StoreConfig",
    "StoreError",
    "StoreOpenError",
    "StoredItem",
    "StoredResponse",
    "new_id",
    "open_store",
    "owner_of",
    "prune_once",
    "retain",
]
