"""The versioned schema on both backends: built from an empty database, migrated from a real v1
database with its data kept, identical to schema.py's tables, and refused when newer than the
code."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from fixtures.store import ALICE, item, put_turn
from qualflow.server.store import Conversation, StoreOpenError, open_store
from qualflow.server.store.engine import open_engine
from qualflow.server.store.migrations import CURRENT, migrate, version_of
from qualflow.server.store.schema import metadata


def shape(engine) -> dict:
    """Each table's columns (name, nullable), indexes and unique constraints, as the database has
    them."""
    insp = sa.inspect(engine)
    return {
        t: (
            {(c["name"], c["nullable"]) for c in insp.get_columns(t)},
            {
                (i["name"], tuple(i["column_names"]))
                for i in insp.get_indexes(t)
                if "duplicates_constraint" not in i
            },  # PostgreSQL's index behind a UNIQUE
            {(u["name"], tuple(u["column_names"])) for u in insp.get_unique_constraints(t)},
        )
        for t in insp.get_table_names()
    }


def expected_shape() -> dict:
    return {
        t.name: (
            {(c.name, c.nullable) for c in t.columns},
            {(i.name, tuple(c.name for c in i.columns)) for i in t.indexes},
            {
                (u.name, tuple(c.name for c in u.columns))
                for u in t.constraints
                if isinstance(u, sa.UniqueConstraint)
            },
        )
        for t in metadata.sorted_tables
    }


def test_an_empty_database_is_built_at_the_current_version(store_url):
    store = open_store(store_url)
    try:
        with store.engine.connect() as conn:
            assert version_of(conn) == CURRENT == 2
            assert conn.execute(
                sa.text("SELECT version FROM schema_version ORDER BY version")
            ).scalars().all() == [1, 2]
        assert shape(store.engine) == expected_shape()
    finally:
        store.close()


def test_a_v1_database_is_migrated_with_its_data(store_url):
    engine = open_engine(store_url)
    assert migrate(engine, target=1) == 0
    assert not sa.inspect(engine).has_table("conversations")
    with engine.begin() as conn:  # a response and its items as v1 code stored them
        conn.execute(
            sa.text(
                "INSERT INTO responses (id, owner, created_at, model, status, "
                "previous_response_id, response) VALUES ('r1', :o, 1.0, 'tiny', 'completed',"
                ' NULL, \'{"id": "r1"}\')'
            ),
            {"o": ALICE},
        )
        conn.execute(
            sa.text(
                "INSERT INTO response_items (response_id, position, kind, item_id, type, item)"
                " VALUES ('r1', 0, 'input', 'u1', 'message', '{\"id\": \"u1\", \"type\": "
                "\"message\"}'), ('r1', 1, 'output', 'a1', 'message', '{\"id\": \"a1\", "
                '"type": "message"}\')'
            )
        )
    engine.dispose()

    store = open_store(store_url)  # the current code migrates it to v2
    try:
        assert store.get(ALICE, "r1").response == {"id": "r1"}
        assert store.get(ALICE, "r1").conversation_id is None
        assert [i.item_id for i in store.chain(ALICE, "r1").items] == ["u1", "a1"]
        put_turn(store, "r2", previous="r1")
        assert [i["id"] for i in store.chain(ALICE, "r2").context()] == [
            "u1",
            "a1",
            "r2-in0",
            "r2-out",
        ]
        store.create_conversation(Conversation("conv_1", ALICE, 2.0), [item("m1")])
        assert store.list_items(ALICE, "conv_1").first_id == "m1"
        assert shape(store.engine) == expected_shape()
    finally:
        store.close()


def test_reopening_migrates_nothing(store_url):
    open_store(store_url).close()
    engine = open_engine(store_url)
    try:
        assert migrate(engine) == CURRENT
    finally:
        engine.dispose()


def test_a_newer_database_is_refused(store_url):
    open_store(store_url).close()
    engine = open_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO schema_version (version, applied_at) VALUES (99, 0)"))
    engine.dispose()
    with pytest.raises(StoreOpenError, match="version 99, newer than this qualflow's 2"):
        open_store(store_url)
