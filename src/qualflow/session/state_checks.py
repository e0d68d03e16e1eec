"""The protocol checks of stored state, for a stack that stores responses: our server when its
/health lists the `store` capability, an endpoint when its model's config says `state: true`. With
the real `openai` SDK and its types, like session.conformance:

- a stored response is retrieved whole, a streamed one too;
- a continuation with `previous_response_id` names its predecessor, and its input holds the chain
  (it counts more input tokens than its own input and the predecessor's output together), while
  its own `input_items` are its own input only;
- a deleted response gets a 404, and continuing it a 400 naming `previous_response_id`;
- `input_items` come newest first by default, and page in order with `limit` and `after`;
- a conversation's items are its own, the turn's input and the turn's output, in order;
- with two API keys (our server with the session's keys): what one key stored is a 404 for the
  other on every route, and still there for its own.

The first request of a check carries the check's request id; its further requests carry that id
with `.2`, `.3`, ... (each its own server timing record)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import openai

from .conformance import PROMPT, Checker, CheckFailed

N = 4  # max_output_tokens of every request: the checks look at state, not text
PAGE_TEXTS = tuple(f"item {i}" for i in range(5))


@dataclass(frozen=True)
class StateSupport:
    keys: tuple[str, ...] = ()  # the server's API keys, where the session made them (isolation)


def state_support(
    health: dict, endpoint=None, stateful: bool = False, keys: tuple[str, ...] = ()
) -> StateSupport | None:
    """Whether the stack stores responses: an endpoint when its config says so (`stateful`), our
    server when its /health lists the `store` capability."""
    if endpoint is not None:
        return StateSupport() if stateful else None
    if "store" not in (health.get("capabilities") or ()):
        return None
    return StateSupport(keys=tuple(keys))


def state_checks(support: StateSupport | None):
    """The `more` of conformance.run_protocol_checks: these checks where the stack stores."""
    return None if support is None else (lambda checker: StateChecks(checker, support).checks())


def _expect(cond: bool, msg: str) -> None:
    if not cond:
        raise CheckFailed(msg)


def _texts(items) -> list[str]:
    return [c.text for i in items for c in (getattr(i, "content", None) or [])]


def _status_of(call: Callable[[], object]) -> int | None:
    """The HTTP status `call` raised (None: it succeeded)."""
    try:
        call()
    except openai.APIStatusError as e:
        return e.status_code
    return None


class StateChecks:
    def __init__(self, checker: Checker, support: StateSupport):
        self.c, self.support = checker, support
        self.client = checker.client

    def _ids(self, rid: str):
        return (rid if n == 1 else f"{rid}.{n}" for n in itertools.count(1))

    def _create(self, rid: str, input=PROMPT, client=None, **kw):
        return (client or self.client).responses.create(
            model=self.c.model,
            input=input,
            max_output_tokens=N,
            extra_headers=self.c._headers(rid),
            **kw,
        )

    def store_and_retrieve(self, rid: str) -> str:
        ids = self._ids(rid)
        r = self._create(next(ids), store=True)
        _expect(r.store is True, f"store={r.store!r} on a store:true response")
        got = self.client.responses.retrieve(r.id)
        _expect(
            got.model_dump() == r.model_dump(), "the retrieved response differs from the one made"
        )
        events = list(self._create(next(ids), input="stream it", store=True, stream=True))
        final = events[-1].response
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        got = self.client.responses.retrieve(final.id)
        _expect(
            got.status == final.status and got.output_text == text,
            f"streamed response retrieved as status={got.status!r} text={got.output_text!r}, "
            f"streamed status={final.status!r} text={text!r}",
        )
        return f"{r.id} and streamed {final.id} retrieved whole"

    def continuation(self, rid: str) -> str:
        ids = self._ids(rid)
        r1 = self._create(next(ids), input="one two three four five", store=True)
        r2 = self._create(next(ids), input="six", previous_response_id=r1.id, store=True)
        alone = self._create(next(ids), input="six", store=False)
        _expect(
            r2.previous_response_id == r1.id,
            f"previous_response_id={r2.previous_response_id!r}, expected {r1.id!r}",
        )
        chain, own = r2.usage.input_tokens, alone.usage.input_tokens
        _expect(
            chain > own + r1.usage.output_tokens and chain >= r1.usage.input_tokens,
            f"the continuation counts {chain} input tokens: not the chain (its own input alone "
            f"{own}, the first turn's input {r1.usage.input_tokens} and output "
            f"{r1.usage.output_tokens})",
        )
        mine = _texts(self.client.responses.input_items.list(r2.id).data)
        _expect(mine == ["six"], f"the continuation's input_items are {mine}, expected ['six']")
        return f"input tokens {chain} = chain (alone {own}); input_items {mine}"

    def not_found_after_delete(self, rid: str) -> str:
        ids = self._ids(rid)
        r = self._create(next(ids), store=True)
        deleted = self.client.responses.delete(r.id)
        _expect(deleted is None or getattr(deleted, "deleted", True), f"delete said {deleted}")
        status = _status_of(lambda: self.client.responses.retrieve(r.id))
        _expect(status == 404, f"retrieve after delete: HTTP {status}, expected 404")
        try:
            self._create(next(ids), previous_response_id=r.id)
        except openai.APIStatusError as e:
            _expect(
                e.status_code == 400 and getattr(e, "param", None) == "previous_response_id",
                f"continuing a deleted response: HTTP {e.status_code} param "
                f"{getattr(e, 'param', None)!r}, expected 400 naming previous_response_id",
            )
            return "retrieve 404, continue 400 previous_response_id"
        raise CheckFailed("continuing a deleted response was accepted")

    def input_items_pages(self, rid: str) -> str:
        texts = list(PAGE_TEXTS)
        r = self._create(rid, input=[{"role": "user", "content": t} for t in texts], store=True)
        items = self.client.responses.input_items
        newest_first = _texts(items.list(r.id).data)
        _expect(newest_first == texts[::-1], f"default order {newest_first}, expected desc")
        first = items.list(r.id, order="asc", limit=2)
        _expect(
            _texts(first.data) == texts[:2] and first.has_more,
            f"first page {_texts(first.data)} has_more={first.has_more}",
        )
        _expect(
            first.first_id == first.data[0].id and first.last_id == first.data[-1].id,
            f"first_id/last_id {first.first_id}/{first.last_id}",
        )
        rest = items.list(r.id, order="asc", limit=10, after=first.last_id)
        _expect(
            _texts(rest.data) == texts[2:] and not rest.has_more,
            f"second page {_texts(rest.data)} has_more={rest.has_more}",
        )
        return f"{len(texts)} items: desc by default, pages of 2 then {len(rest.data)} in order"

    def conversation_items(self, rid: str) -> str:
        conv = self.client.conversations.create(
            items=[{"type": "message", "role": "user", "content": "hi"}],
            extra_headers=self.c._headers(f"{rid}.conversation"),
        )
        try:
            r = self._create(rid, input="turn", conversation=conv.id, store=True)
            items = self.client.conversations.items.list(conv.id, order="asc").data
            kinds = [(i.type, getattr(i, "role", None)) for i in items]
            want = [("message", "user")] * 2 + [("message", "assistant")]
            _expect(kinds == want, f"conversation items {kinds}, expected {want}")
            _expect(_texts(items)[:2] == ["hi", "turn"], f"conversation texts {_texts(items)}")
            _expect(items[-1].id == r.output[-1].id, "the last item is not the response's output")
        finally:
            self.client.conversations.delete(conv.id)
        status = _status_of(lambda: self.client.conversations.retrieve(conv.id))
        _expect(status == 404, f"retrieve after delete: HTTP {status}, expected 404")
        return f"{len(items)} items in order; 404 after delete"

    def key_isolation(self, rid: str) -> str:
        mine, other = self.support.keys[:2]
        me = self.client.with_options(api_key=mine)
        them = self.client.with_options(api_key=other)
        ids = self._ids(rid)
        r = self._create(next(ids), client=me, store=True)
        conv = me.conversations.create(extra_headers=self.c._headers(f"{rid}.conversation"))
        try:
            routes = {
                "GET response": lambda: them.responses.retrieve(r.id),
                "GET input_items": lambda: them.responses.input_items.list(r.id),
                "DELETE response": lambda: them.responses.delete(r.id),
                "GET conversation": lambda: them.conversations.retrieve(conv.id),
                "GET conversation items": lambda: them.conversations.items.list(conv.id),
                "DELETE conversation": lambda: them.conversations.delete(conv.id),
            }
            seen = {name: _status_of(call) for name, call in routes.items()}
            leaks = {name: s for name, s in seen.items() if s != 404}
            _expect(not leaks, f"another key's object answered {leaks} (expected 404)")
            try:
                self._create(next(ids), client=them, previous_response_id=r.id)
                raise CheckFailed("another key continued the response")
            except openai.APIStatusError as e:
                _expect(e.status_code == 400, f"another key continuing: HTTP {e.status_code}")
            _expect(me.responses.retrieve(r.id).id == r.id, "the owner lost its response")
            _expect(me.conversations.retrieve(conv.id).id == conv.id, "the owner lost its conv")
        finally:
            me.conversations.delete(conv.id)
        return f"{len(routes) + 1} routes refuse another key; the owner keeps both"

    def checks(self) -> list[tuple[str, Callable[[str], str]]]:
        out = [
            ("state_store_and_retrieve", self.store_and_retrieve),
            ("state_continue_previous_response_id", self.continuation),
            ("state_not_found_after_delete", self.not_found_after_delete),
            ("state_input_items_order_and_pages", self.input_items_pages),
            ("state_conversation_items", self.conversation_items),
        ]
        if len(self.support.keys) >= 2:
            out.append(("state_key_isolation", self.key_isolation))
        return out
