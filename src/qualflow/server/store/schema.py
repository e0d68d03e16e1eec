"""The store's tables at the current schema version (migrations.CURRENT), as the queries use them.
The migrations build exactly these; a test compares the migrated database with them."""

from __future__ import annotations

import sqlalchemy as sa

ID = sa.String(128)
metadata = sa.MetaData()

schema_version = sa.Table(
    "schema_version",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", sa.Float, nullable=False),
)

responses = sa.Table(
    "responses",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("owner", ID, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("model", sa.String(256), nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("previous_response_id", ID, nullable=True),
    sa.Column("response", sa.Text, nullable=False),
    sa.Column("conversation_id", ID, nullable=True),  # v2
    sa.Index("ix_responses_created_at", "created_at"),
    sa.Index("ix_responses_owner_created_at", "owner", "created_at"),  # v2
)

response_items = sa.Table(
    "response_items",
    metadata,
    sa.Column(
        "response_id", ID, sa.ForeignKey("responses.id", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("position", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("item_id", ID, nullable=False),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("item", sa.Text, nullable=False),
    sa.UniqueConstraint("response_id", "item_id", name="uq_response_items_item"),
)

conversations = sa.Table(  # v2
    "conversations",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("owner", ID, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("metadata", sa.Text, nullable=False),
    sa.Index("ix_conversations_created_at", "created_at"),
    sa.Index("ix_conversations_owner_created_at", "owner", "created_at"),
)

conversation_items = sa.Table(  # v2
    "conversation_items",
    metadata,
    sa.Column(
        "conversation_id",
        ID,
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("position", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("item_id", ID, nullable=False),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("item", sa.Text, nullable=False),
    sa.UniqueConstraint("conversation_id", "item_id", name="uq_conversation_items_item"),
)
