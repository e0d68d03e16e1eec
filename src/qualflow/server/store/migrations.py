"""The schema's versions and the ordered steps between them. Opening a store runs the steps its
database lacks, each in its own transaction, under a lock (BEGIN IMMEDIATE on SQLite, an advisory
lock on PostgreSQL) so that two servers opening one database at once migrate it once.

  v1  responses and their items (the chain, input_items)
  v2  conversations and their items, responses.conversation_id, owner indexes

A step is frozen once released: it spells out its own DDL instead of reusing schema.py's tables,
which follow the newest version."""

from __future__ import annotations

import time
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .engine import write_tx
from .errors import StoreOpenError

ADVISORY_LOCK_KEY = 0x716C666C6F77  # "qlflow": PostgreSQL's advisory lock of qualflow's migrations


def _v1(conn: Connection) -> None:
    md = sa.MetaData()
    sa.Table(
        "responses",
        md,
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("previous_response_id", sa.String(128), nullable=True),
        sa.Column("response", sa.Text, nullable=False),
        sa.Index("ix_responses_created_at", "created_at"),
    )
    sa.Table(
        "response_items",
        md,
        sa.Column(
            "response_id",
            sa.String(128),
            sa.ForeignKey("responses.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("position", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("item_id", sa.String(128), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("item", sa.Text, nullable=False),
        sa.UniqueConstraint("response_id", "item_id", name="uq_response_items_item"),
    )
    md.create_all(conn)


def _v2(conn: Connection) -> None:
    md = sa.MetaData()
    sa.Table(
        "conversations",
        md,
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("metadata", sa.Text, nullable=False),
        sa.Index("ix_conversations_created_at", "created_at"),
        sa.Index("ix_conversations_owner_created_at", "owner", "created_at"),
    )
    sa.Table(
        "conversation_items",
        md,
        sa.Column(
            "conversation_id",
            sa.String(128),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("position", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("item_id", sa.String(128), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("item", sa.Text, nullable=False),
        sa.UniqueConstraint("conversation_id", "item_id", name="uq_conversation_items_item"),
    )
    md.create_all(conn)
    conn.execute(sa.text("ALTER TABLE responses ADD COLUMN conversation_id VARCHAR(128)"))
    conn.execute(
        sa.text("CREATE INDEX ix_responses_owner_created_at ON responses (owner, created_at)")
    )


STEPS: tuple[Callable[[Connection], None], ...] = (_v1, _v2)  # STEPS[n - 1] builds version n
CURRENT = len(STEPS)

_versions = sa.Table(
    "schema_version",
    sa.MetaData(),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", sa.Float, nullable=False),
)


def version_of(conn: Connection) -> int:
    """The database's schema version; 0 for an empty database."""
    if not sa.inspect(conn).has_table("schema_version"):
        return 0
    return conn.execute(sa.select(sa.func.max(_versions.c.version))).scalar() or 0


def migrate(engine: Engine, target: int = CURRENT) -> int:
    """Bring the database up to `target` (default: the newest version); the version it had before.
    StoreOpenError if the database is newer than this code."""
    before = None
    while True:
        with write_tx(engine) as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(ADVISORY_LOCK_KEY)))
            version = version_of(conn)
            before = version if before is None else before
            if version > CURRENT:
                raise StoreOpenError(
                    f"the response store's schema is version {version}, newer than this "
                    f"qualflow's {CURRENT}: upgrade qualflow"
                )
            if version >= target:
                return before
            if version == 0:
                _versions.create(conn, checkfirst=True)
            STEPS[version](conn)
            conn.execute(_versions.insert().values(version=version + 1, applied_at=time.time()))
