"""input_items and conversation items pagination (OpenAI's after/limit/order), on both backends."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from fixtures.store import ALICE, item, response
from qualflow.server.store import Conversation, InvalidPage

IDS = [f"in{i:02d}" for i in range(25)]


@pytest.fixture
def stored(store):
    store.put(response("r1"), [item(i) for i in IDS], [item("out")])
    return store


def ids(page):
    return [d["id"] for d in page.data]


def test_default_is_20_newest_first(stored):
    page = stored.input_items(ALICE, "r1")
    assert ids(page) == IDS[::-1][:20]
    assert (page.first_id, page.last_id, page.has_more) == ("in24", "in05", True)
    assert page.to_json()["object"] == "list"


def test_walks_every_item_in_both_orders_without_the_outputs(stored):
    for order, expected in (("asc", IDS), ("desc", IDS[::-1])):
        seen, after = [], None
        while True:
            page = stored.input_items(ALICE, "r1", after=after, limit=7, order=order)
            seen += ids(page)
            if not page.has_more:
                break
            after = page.last_id
        assert seen == expected


def test_has_more_is_exact_at_the_boundary(stored):
    assert stored.input_items(ALICE, "r1", limit=25, order="asc").has_more is False
    assert stored.input_items(ALICE, "r1", limit=24, order="asc").has_more is True
    last = stored.input_items(ALICE, "r1", after="in24", order="asc")
    assert (last.data, last.first_id, last.last_id, last.has_more) == ((), None, None, False)


@pytest.mark.parametrize("limit", [1, 100])
def test_limit_bounds_are_accepted(stored, limit):
    assert len(stored.input_items(ALICE, "r1", limit=limit).data) == min(limit, 25)


@pytest.mark.parametrize(
    "kwargs, param",
    [
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"limit": True}, "limit"),
        ({"order": "up"}, "order"),
        ({"after": "nope"}, "after"),
        ({"after": "out"}, "after"),
    ],
)
def test_bad_arguments_name_their_param(stored, kwargs, param):
    with pytest.raises(InvalidPage) as e:
        stored.input_items(ALICE, "r1", **kwargs)
    assert e.value.param == param


def test_a_page_is_read_with_limit_plus_one_in_sql(stored):
    statements = []
    sa.event.listen(
        stored.engine,
        "before_cursor_execute",
        lambda conn, cur, statement, params, ctx, many: statements.append((statement, params)),
    )
    stored.input_items(ALICE, "r1", limit=5)
    paged = [(s, p) for s, p in statements if "response_items" in s and "LIMIT" in s.upper()]
    assert paged, statements
    assert 6 in (paged[-1][1].values() if isinstance(paged[-1][1], dict) else paged[-1][1])


def test_conversation_items_page_the_same_way(store):
    store.create_conversation(Conversation("conv_1", ALICE, 1.0), [item(i) for i in IDS[:20]])
    store.add_items(ALICE, "conv_1", [item(i) for i in IDS[20:]])
    page = store.list_items(ALICE, "conv_1", after="in10", limit=3, order="asc")
    assert (ids(page), page.has_more) == (["in11", "in12", "in13"], True)
    assert ids(store.list_items(ALICE, "conv_1", limit=2)) == ["in24", "in23"]
    with pytest.raises(InvalidPage):
        store.list_items(ALICE, "conv_1", limit=101)
