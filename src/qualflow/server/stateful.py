"""Stateful Responses over the response store: a request's `Turn` (what it inherits through
`previous_response_id` or a `conversation`, and whether its response is stored), the stateless
request the handler runs for it (the inherited items, then its own input), and the response's
write, before the client is told it completed.

A request is stateless (None from `turn_of`, today's path, no store call) when the server has no
store, or when it sets `store: false` and inherits nothing. Every store call runs on a worker thread
(AsyncStore); its time goes to the timing record (store_load_ns, store_write_ns)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .protocol.errors import ApiError, bad_request
from .protocol.input_items import input_messages
from .protocol.requests import CreateResponse
from .protocol.responses import Response
from .store import AsyncStore, ChainBroken, DuplicateId, NotFound, StoredResponse, new_id
from .store.interface import MAX_LIMIT
from .store.records import JSON
from .timing import TimingRecord

log = logging.getLogger("qualflow.server")

# the id prefix of an item the server names, by type (OpenAI's)
_PREFIX = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "reasoning": "rs",
}
_UNRENDERED: set[str] = set()  # item types the request model refuses as input (found by probing)


def no_store(req: CreateResponse) -> None:
    """A server without a store: `store: true` is refused (previous_response_id and conversation
    get the handler's own 400s)."""
    if req.store:
        raise bad_request(
            "Unsupported value: 'store' cannot be true: this server keeps no responses (start it "
            "with `qualflow serve --store`).",
            "store",
            "unsupported_value",
        )


def conversation_id(req: CreateResponse) -> str | None:
    c = req.conversation
    if c is None or isinstance(c, str):
        return c
    if not isinstance(c.get("id"), str):
        raise bad_request(
            "Invalid 'conversation': expected an id or {'id': ...}.", "conversation", "invalid_type"
        )
    return c["id"]


@dataclass
class Turn:
    """One stateful request: its owner, what it inherits (`context`, oldest first) and whether its
    response is stored (`keep`)."""

    store: AsyncStore
    owner: str
    req: CreateResponse
    keep: bool
    conversation_id: str | None
    context: list[JSON] = field(default_factory=list)
    dropped: int = 0  # context items left out by truncation "auto"

    def echo(self) -> dict:
        return {
            "store": self.keep,
            "previous_response_id": self.req.previous_response_id,
            "truncation": self.req.truncation or "disabled",
        }


def turn_of(store: AsyncStore | None, req: CreateResponse, owner: str) -> Turn | None:
    """The request's Turn, or None when it is stateless (see the module's doc)."""
    if store is None:
        no_store(req)
        return None
    conv = conversation_id(req)
    if conv is not None and req.previous_response_id is not None:
        raise bad_request(
            "Mutually exclusive parameters: 'previous_response_id' and 'conversation' cannot be "
            "used together.",
            "conversation",
            "invalid_value",
        )
    keep = req.store is not False
    if not keep and conv is None and req.previous_response_id is None:
        return None
    return Turn(store, owner, req, keep, conv)


def _all_conversation_items(store, owner: str, conv: str) -> list[JSON]:
    items, after = [], None
    while True:
        page = store.list_items(owner, conv, after=after, limit=MAX_LIMIT, order="asc")
        items += page.data
        if not page.has_more:
            return items
        after = page.last_id


async def load(turn: Turn, rec: TimingRecord) -> None:
    """The inherited items, from the store (a worker thread): 400 previous_response_not_found for a
    chain that is unknown, another key's or broken; 404 for an unknown conversation."""
    if turn.req.previous_response_id is None and turn.conversation_id is None:
        return  # nothing inherited: no store call
    t0 = time.perf_counter_ns()
    try:
        if turn.req.previous_response_id is not None:
            chain = await turn.store.chain(turn.owner, turn.req.previous_response_id)
            turn.context = chain.context()
        elif turn.conversation_id is not None:
            turn.context = await turn.store.run(
                _all_conversation_items, turn.owner, turn.conversation_id
            )
    except (NotFound, ChainBroken) as e:
        if turn.req.previous_response_id is None:
            raise ApiError(404, str(e), param="conversation") from None
        why = f" ({e})" if isinstance(e, ChainBroken) else ""
        raise bad_request(
            f"Previous response with id '{turn.req.previous_response_id}' not found.{why}",
            "previous_response_id",
            "previous_response_not_found",
        ) from None
    finally:
        rec.store_load_ns = time.perf_counter_ns() - t0


def renderable(items: list[JSON]) -> list[JSON]:
    """The inherited items the request model takes as input: every stored type is handed back, a
    type it refuses (today: reasoning; function calls until tools land) is left out."""
    out = []
    for item in items:
        kind = item.get("type", "message")
        if kind in _UNRENDERED:
            continue
        if kind != "message":
            try:
                input_messages([item])
            except ApiError as e:
                if e.param == "input[0].type":
                    _UNRENDERED.add(kind)
                    continue
        out.append(item)
    return out


def stateless(turn: Turn) -> CreateResponse:
    """The request the handler runs: the inherited items, then the request's own input."""
    own = turn.req.input
    update = {"previous_response_id": None, "conversation": None, "store": None}
    update["truncation"] = None
    context = renderable(turn.context[turn.dropped :])
    if context and own is not None:
        own = [{"role": "user", "content": own}] if isinstance(own, str) else own
        update["input"] = [*context, *own]
    return turn.req.model_copy(update=update)


def prepare(turn: Turn, prepare_one: Callable[[CreateResponse], object]):
    """`prepare_one` (the handler's prepare) of the stateless request; with truncation "auto", the
    oldest inherited items are dropped until it fits the context."""
    while True:
        try:
            return prepare_one(stateless(turn))
        except ApiError as e:
            auto = turn.req.truncation == "auto" and e.code == "context_length_exceeded"
            if not auto or turn.dropped >= len(turn.context):
                raise
            turn.dropped += max(1, (len(turn.context) - turn.dropped) // 8)


def own_items(inp: str | list) -> list[JSON]:
    """The request's own input as items to store: each with a type and an id, text as parts."""
    raw = [{"role": "user", "content": inp}] if isinstance(inp, str) else inp
    out, seen = [], set()
    for item in raw:
        item = {"type": "message", **item}
        content = item.get("content")
        if item["type"] == "message" and isinstance(content, str):
            part = "output_text" if item.get("role") == "assistant" else "input_text"
            item["content"] = [{"type": part, "text": content}]
        if not isinstance(item.get("id"), str) or item["id"] in seen:
            item["id"] = new_id(_PREFIX.get(item["type"], "item"))
        seen.add(item["id"])
        out.append(item)
    return out


async def write(turn: Turn, resp: Response, rec: TimingRecord) -> Response:
    """The response with the turn's fields echoed, stored when the turn keeps it (a worker thread;
    done before the caller sends the completion). A failed write is a 500."""
    resp = resp.model_copy(update=turn.echo())
    if not turn.keep:
        return resp
    body = resp.model_dump(mode="json")
    stored = StoredResponse(
        id=resp.id,
        owner=turn.owner,
        created_at=time.time(),
        model=resp.model,
        status=resp.status,
        response=body,
        previous_response_id=turn.req.previous_response_id,
        conversation_id=turn.conversation_id,
    )
    t0 = time.perf_counter_ns()
    try:
        await turn.store.put(stored, own_items(turn.req.input), body["output"])
    except DuplicateId as e:
        raise bad_request(f"Invalid 'input': {e}", "input", "invalid_value") from None
    except Exception as e:
        log.exception("response store: could not store %s", resp.id)
        raise ApiError(
            500,
            f"The response could not be stored: {type(e).__name__}.",
            "server_error",
            None,
            "server_error",
        ) from None
    # only a write that committed has a time: a failed one is the record's error (the client
    # got a 500 or an error event, not the response)
    rec.store_write_ns = time.perf_counter_ns() - t0
    return resp
