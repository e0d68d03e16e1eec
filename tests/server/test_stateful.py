"""Stateful Responses end to end on a real `qualflow serve --store` (SQLite) through the real OpenAI
SDK: store and retrieve (streamed too), continuing a chain, 404 after delete, input_items order and
pages, conversations and their items, truncation, and the store's times in the timing record."""

from __future__ import annotations

import httpx
import openai
import pytest

from fixtures.stateful import client, model_of, stateful_server

pytestmark = pytest.mark.timeout(300)
N = 4  # max_output_tokens of every request: the tests look at state, not text


@pytest.fixture(scope="module")
def srv(bundle_dir, tmp_path_factory):
    work = tmp_path_factory.mktemp("stateful")
    s = stateful_server(bundle_dir, work, str(work / "store.db"), "--max-context", "160").start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def c(srv):
    return client(srv)


@pytest.fixture(scope="module")
def model(srv):
    return model_of(srv)


def test_health_lists_the_store(srv):
    h = httpx.get(srv.url + "/health", timeout=10).json()
    assert "store" in h["capabilities"] and h["store"] == "sqlite"


def test_a_response_is_stored_by_default_and_retrieved_whole(c, model):
    r = c.responses.create(model=model, input="hello", max_output_tokens=N)
    assert r.store is True
    got = c.responses.retrieve(r.id)
    assert got.model_dump() == r.model_dump()


def test_a_streamed_response_is_retrieved_whole(c, model):
    events = list(c.responses.create(model=model, input="hi", max_output_tokens=N, stream=True))
    final = events[-1].response
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    got = c.responses.retrieve(final.id)
    assert got.status == final.status and got.output_text == text and got.store is True


def test_store_false_is_not_stored_and_makes_no_store_call(srv, c, model):
    r = c.responses.create(model=model, input="hello", max_output_tokens=N, store=False)
    assert r.store is False
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve(r.id)
    rec = next(x for x in srv.records() if x["response_id"] == r.id)
    assert rec["store_load_ns"] is None and rec["store_write_ns"] is None


def test_a_continuation_holds_the_chain(srv, c, model):
    r1 = c.responses.create(model=model, input="one two three", max_output_tokens=N)
    r2 = c.responses.create(
        model=model, input="four", previous_response_id=r1.id, max_output_tokens=N
    )
    alone = c.responses.create(model=model, input="four", max_output_tokens=N, store=False)
    assert r2.previous_response_id == r1.id
    # the chain's input and output come before the new input
    assert r2.usage.input_tokens > alone.usage.input_tokens + r1.usage.output_tokens
    rec = next(x for x in srv.records() if x["response_id"] == r2.id)
    assert rec["store_load_ns"] > 0 and rec["store_write_ns"] > 0
    items = c.responses.input_items.list(r2.id)
    assert [i.content[0].text for i in items.data] == ["four"]  # its own input only


def test_deleted_and_unknown_ids_get_404_and_cannot_be_continued(c, model):
    r = c.responses.create(model=model, input="x", max_output_tokens=N)
    c.responses.delete(r.id)
    for rid in (r.id, "resp_unknown"):
        with pytest.raises(openai.NotFoundError) as e:
            c.responses.retrieve(rid)
        assert e.value.body["message"] == f"Response with id '{rid}' not found."
        with pytest.raises(openai.BadRequestError) as e:
            c.responses.create(model=model, input="y", previous_response_id=rid)
        assert e.value.code == "previous_response_not_found"


def test_input_items_pages_in_order(c, model):
    texts = [f"m{i}" for i in range(5)]
    r = c.responses.create(
        model=model, input=[{"role": "user", "content": t} for t in texts], max_output_tokens=N
    )
    assert [i.content[0].text for i in c.responses.input_items.list(r.id)] == texts[::-1]
    first = c.responses.input_items.list(r.id, order="asc", limit=2)
    assert [i.content[0].text for i in first.data] == texts[:2] and first.has_more
    rest = c.responses.input_items.list(r.id, order="asc", limit=10, after=first.last_id)
    assert [i.content[0].text for i in rest.data] == texts[2:] and not rest.has_more
    for bad in ({"limit": 0}, {"limit": 101}, {"order": "up"}):
        with pytest.raises(openai.BadRequestError):
            c.responses.input_items.list(r.id, **bad)


def test_conversations_and_their_items(c, model):
    conv = c.conversations.create(
        items=[{"type": "message", "role": "user", "content": "hi"}], metadata={"k": "v"}
    )
    assert c.conversations.retrieve(conv.id).metadata == {"k": "v"}
    assert c.conversations.update(conv.id, metadata={"k": "w"}).metadata == {"k": "w"}
    added = c.conversations.items.create(
        conv.id, items=[{"type": "message", "role": "user", "content": "more"}]
    )
    r = c.responses.create(model=model, input="turn", conversation=conv.id, max_output_tokens=N)
    items = c.conversations.items.list(conv.id, order="asc")
    kinds = [(i.type, getattr(i, "role", None)) for i in items.data]
    assert kinds == [("message", "user")] * 3 + [("message", "assistant")]
    assert items.data[-1].id == r.output[-1].id
    one = c.conversations.items.retrieve(added.data[0].id, conversation_id=conv.id)
    assert one.content[0].text == "more"
    c.conversations.items.delete(added.data[0].id, conversation_id=conv.id)
    assert len(c.conversations.items.list(conv.id).data) == 3
    with pytest.raises(openai.BadRequestError) as e:
        c.responses.create(model=model, input="x", conversation=conv.id, previous_response_id=r.id)
    assert e.value.param == "conversation"
    assert c.conversations.delete(conv.id).deleted
    with pytest.raises(openai.NotFoundError):
        c.conversations.retrieve(conv.id)


def test_truncation_disabled_refuses_an_overflowing_chain_and_auto_drops_its_oldest(c, model):
    long = " ".join(["word"] * 60)
    prev = c.responses.create(model=model, input=long, max_output_tokens=N)
    prev = c.responses.create(
        model=model, input=long, previous_response_id=prev.id, max_output_tokens=N
    )
    with pytest.raises(openai.BadRequestError) as e:
        c.responses.create(
            model=model, input=long, previous_response_id=prev.id, max_output_tokens=N
        )
    assert e.value.code == "context_length_exceeded"
    r = c.responses.create(
        model=model,
        input=long,
        previous_response_id=prev.id,
        truncation="auto",
        max_output_tokens=N,
    )
    assert r.truncation == "auto" and r.usage.input_tokens + N <= 160
