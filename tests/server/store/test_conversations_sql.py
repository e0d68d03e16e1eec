"""Conversations on both backends: create, retrieve, update, delete, items, owner isolation, and the
items a response stored in a conversation adds to it."""

from __future__ import annotations

import pytest

from fixtures.store import ALICE, BOB, item, response
from qualflow.server.store import Conversation, DuplicateId, NotFound


@pytest.fixture
def conv(store):
    c = Conversation("conv_1", ALICE, 100.0, {"topic": "demo"})
    store.create_conversation(c, [item("m1", role="user", content="hi")])
    return c


def test_create_then_retrieve(store, conv):
    assert store.get_conversation(ALICE, "conv_1") == conv
    assert store.get_item(ALICE, "conv_1", "m1") == item("m1", role="user", content="hi")


def test_create_twice_is_a_duplicate(store, conv):
    with pytest.raises(DuplicateId):
        store.create_conversation(Conversation("conv_1", BOB, 1.0))


def test_update_replaces_the_metadata(store, conv):
    updated = store.update_conversation(ALICE, "conv_1", {"topic": "other", "n": "2"})
    assert updated.metadata == {"topic": "other", "n": "2"}
    assert store.get_conversation(ALICE, "conv_1") == updated


def test_delete_removes_it_and_its_items(store, conv):
    store.delete_conversation(ALICE, "conv_1")
    with pytest.raises(NotFound):
        store.get_conversation(ALICE, "conv_1")
    with pytest.raises(NotFound):
        store.delete_conversation(ALICE, "conv_1")
    store.create_conversation(
        Conversation("conv_1", ALICE, 1.0), [item("m1")]
    )  # item ids free again


def test_add_items_appends_in_order(store, conv):
    added = store.add_items(ALICE, "conv_1", [item("m2"), item("fc", "function_call")])
    assert [(i.position, i.item_id, i.type) for i in added] == [
        (1, "m2", "message"),
        (2, "fc", "function_call"),
    ]
    page = store.list_items(ALICE, "conv_1", order="asc")
    assert [d["id"] for d in page.data] == ["m1", "m2", "fc"]
    with pytest.raises(DuplicateId):
        store.add_items(ALICE, "conv_1", [item("m2")])


def test_delete_item(store, conv):
    store.add_items(ALICE, "conv_1", [item("m2")])
    store.delete_item(ALICE, "conv_1", "m1")
    assert [d["id"] for d in store.list_items(ALICE, "conv_1").data] == ["m2"]
    with pytest.raises(NotFound, match="Item with id 'm1'"):
        store.get_item(ALICE, "conv_1", "m1")
    with pytest.raises(NotFound):
        store.delete_item(ALICE, "conv_1", "m1")


def test_a_response_in_a_conversation_appends_its_inputs_and_outputs(store, conv):
    store.put(
        response("r1", conversation="conv_1"), [item("u2")], [item("rs", "reasoning"), item("a2")]
    )
    assert [d["id"] for d in store.list_items(ALICE, "conv_1", order="asc").data] == [
        "m1",
        "u2",
        "rs",
        "a2",
    ]
    assert store.get(ALICE, "r1").conversation_id == "conv_1"


def test_a_response_in_another_owners_conversation_is_not_stored(store, conv):
    with pytest.raises(NotFound, match="Conversation"):
        store.put(response("r1", BOB, conversation="conv_1"), [item("u2")], [])
    with pytest.raises(NotFound):
        store.get(BOB, "r1")
    assert [d["id"] for d in store.list_items(ALICE, "conv_1").data] == ["m1"]


def test_another_owner_gets_not_found_everywhere(store, conv):
    calls = [
        lambda: store.get_conversation(BOB, "conv_1"),
        lambda: store.update_conversation(BOB, "conv_1", {}),
        lambda: store.delete_conversation(BOB, "conv_1"),
        lambda: store.add_items(BOB, "conv_1", [item("x")]),
        lambda: store.list_items(BOB, "conv_1"),
        lambda: store.get_item(BOB, "conv_1", "m1"),
        lambda: store.delete_item(BOB, "conv_1", "m1"),
    ]
    for call in calls:
        with pytest.raises(NotFound) as e:
            call()
        assert str(e.value) == "Conversation with id 'conv_1' not found."
    assert store.get_conversation(ALICE, "conv_1") == conv
    assert [d["id"] for d in store.list_items(ALICE, "conv_1").data] == ["m1"]
