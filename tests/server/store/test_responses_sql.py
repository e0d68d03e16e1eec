"""Stored responses on both backends: put/get/delete, the previous_response_id chain, owner
isolation."""

from __future__ import annotations

import pytest

from fixtures.store import ALICE, BOB, item, put_turn, response
from qualflow.server.store import ChainBroken, DuplicateId, NotFound, owner_of


def test_put_then_get_returns_the_record(store):
    r = response("resp_1", created_at=1234.5)
    store.put(r, [item("msg_in")], [item("msg_out")])
    assert store.get(ALICE, "resp_1") == r


def test_get_unknown_is_not_found(store):
    with pytest.raises(NotFound, match="Response with id 'resp_x' not found"):
        store.get(ALICE, "resp_x")


def test_put_twice_is_a_duplicate_and_keeps_the_first(store):
    store.put(response("resp_1"), [item("a")], [])
    with pytest.raises(DuplicateId):
        store.put(response("resp_1", BOB), [item("b")], [])
    assert store.get(ALICE, "resp_1").owner == ALICE
    assert [i["id"] for i in store.input_items(ALICE, "resp_1").data] == ["a"]


@pytest.mark.parametrize(
    "bad, match",
    [({"type": "message"}, "no id"), ({"id": "x"}, "no type"), ("text", "not a JSON object")],
)
def test_put_rejects_an_item_without_id_or_type(store, bad, match):
    with pytest.raises(ValueError, match=match):
        store.put(response("resp_1"), [bad], [])
    with pytest.raises(NotFound):  # nothing half-stored
        store.get(ALICE, "resp_1")


def test_put_rejects_an_item_id_twice(store):
    with pytest.raises(DuplicateId):
        store.put(response("resp_1"), [item("a")], [item("a")])


def test_delete_removes_the_response_and_its_items(store):
    put_turn(store, "resp_1")
    store.delete(ALICE, "resp_1")
    with pytest.raises(NotFound):
        store.get(ALICE, "resp_1")
    with pytest.raises(NotFound):
        store.input_items(ALICE, "resp_1")
    with pytest.raises(NotFound):
        store.delete(ALICE, "resp_1")
    put_turn(store, "resp_1")  # its items went with it: the id and item ids are free again
    assert len(store.input_items(ALICE, "resp_1").data) == 1


def test_chain_has_every_turn_in_order_with_all_item_types(store):
    store.put(
        response("r1"),
        [item("u1", role="user", content="weather?")],
        [
            item("rs1", "reasoning", summary=[]),
            item("fc1", "function_call", name="get", call_id="c1", arguments="{}"),
        ],
    )
    store.put(
        response("r2", previous="r1"),
        [item("fco1", "function_call_output", call_id="c1", output="sunny")],
        [item("m2", role="assistant", content="sunny")],
    )
    store.put(
        response("r3", previous="r2"),
        [item("u3", role="user", content="thanks")],
        [item("m3", role="assistant", content="welcome")],
    )
    chain = store.chain(ALICE, "r3")
    assert [r.id for r in chain.responses] == ["r1", "r2", "r3"]
    assert [i["id"] for i in chain.context()] == ["u1", "rs1", "fc1", "fco1", "m2", "u3", "m3"]
    assert [i["type"] for i in chain.context()][:4] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert [(i.kind, i.position) for i in chain.items][:3] == [
        ("input", 0),
        ("output", 1),
        ("output", 2),
    ]
    assert [i["id"] for i in store.chain(ALICE, "r2").context()] == [
        "u1",
        "rs1",
        "fc1",
        "fco1",
        "m2",
    ]


def test_chain_of_a_first_turn_is_itself(store):
    put_turn(store, "r1", n_inputs=2)
    assert [i.item_id for i in store.chain(ALICE, "r1").items] == ["r1-in0", "r1-in1", "r1-out"]


def test_chain_with_a_deleted_ancestor_is_broken(store):
    put_turn(store, "r1")
    put_turn(store, "r2", previous="r1")
    put_turn(store, "r3", previous="r2")
    store.delete(ALICE, "r1")
    with pytest.raises(ChainBroken, match="'r1'"):
        store.chain(ALICE, "r3")


def test_chain_never_crosses_owners(store):
    put_turn(store, "r1", BOB)
    put_turn(store, "r2", ALICE, previous="r1")  # Alice names Bob's response as her previous one
    with pytest.raises(ChainBroken):
        store.chain(ALICE, "r2")


def test_another_owner_gets_not_found_everywhere(store):
    put_turn(store, "r1", ALICE)
    for call in (
        lambda: store.get(BOB, "r1"),
        lambda: store.chain(BOB, "r1"),
        lambda: store.input_items(BOB, "r1"),
        lambda: store.delete(BOB, "r1"),
    ):
        with pytest.raises(NotFound) as e:
            call()
        assert str(e.value) == "Response with id 'r1' not found."  # as for an unknown id
    assert store.get(ALICE, "r1").id == "r1"  # Bob's delete did nothing


def test_owner_is_a_hash_of_the_key():
    assert owner_of("sk-secret") != owner_of("sk-other")
    assert "sk-secret" not in owner_of("sk-secret")
    assert owner_of(None) == owner_of("") == "anonymous"


def test_a_response_cannot_follow_itself(store):
    with pytest.raises(ValueError, match="cannot follow itself"):
        store.put(response("r1", previous="r1"), [], [])
