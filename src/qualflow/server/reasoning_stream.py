"""The event stream of a response with thinking on: the `reasoning` item (output 0) streams its
`reasoning_text` deltas as the Task produces them and is done when the think block closes; the
message (output 1) follows with its own events. A response cut inside the think block
(max_output_tokens) has no message: its reasoning item ends `incomplete`, then
`response.incomplete`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from qualflow.runtime import FinalEvent

from .protocol.events import (
    ContentPartEvent,
    Event,
    OutputItemEvent,
    ResponseEvent,
    TextDelta,
    TextDoneEvent,
)
from .protocol.reasoning import ReasoningDelta, ReasoningItem, ReasoningText, ReasoningTextDone
from .protocol.responses import OutputMessage, OutputText, Response

MESSAGE_INDEX = 1  # the message's output_index: after the reasoning item


def reasoning_added(item_id: str) -> list[Event]:
    """The reasoning item's opening events (its item, its reasoning_text part)."""
    return [
        OutputItemEvent(type="response.output_item.added", item=ReasoningItem.of(item_id, None)),
        ContentPartEvent(type="response.content_part.added", part=ReasoningText(), item_id=item_id),
    ]


def reasoning_done(item_id: str, text: str, status: str) -> list[Event]:
    """The reasoning item's closing events (text done, part done, item done)."""
    return [
        ReasoningTextDone(item_id=item_id, text=text),
        ContentPartEvent(
            type="response.content_part.done", part=ReasoningText(text=text), item_id=item_id
        ),
        OutputItemEvent(
            type="response.output_item.done", item=ReasoningItem.of(item_id, text, status)
        ),
    ]


def _message_added(item_id: str) -> list[Event]:
    return [
        OutputItemEvent(
            type="response.output_item.added",
            output_index=MESSAGE_INDEX,
            item=OutputMessage.of(item_id, None),
        ),
        ContentPartEvent(
            type="response.content_part.added",
            part=OutputText(),
            item_id=item_id,
            output_index=MESSAGE_INDEX,
        ),
    ]


def _message_done(item_id: str, text: str, status: str) -> list[Event]:
    at = dict(item_id=item_id, output_index=MESSAGE_INDEX)
    return [
        TextDoneEvent(text=text, **at),
        ContentPartEvent(type="response.content_part.done", part=OutputText(text=text), **at),
        OutputItemEvent(
            type="response.output_item.done",
            output_index=MESSAGE_INDEX,
            item=OutputMessage.of(item_id, text, status),
        ),
    ]


async def reasoning_stream(
    p,
    snapshot: Response,
    events: AsyncIterator,
    abandon: Callable[[], None],
    terminal: Callable[[FinalEvent, Response], list[Event]],
) -> AsyncIterator[list]:
    """The stream as lists of events (numbered by the caller): head, one list per Task token event,
    tail. `p`: the handler's Prepared request; `events`: its Task events; `abandon`: cancel it (the
    caller left early); `terminal`: the stream's last events."""
    rid, mid = p.reasoning_id, p.message_id
    yield [
        ResponseEvent(type="response.created", response=snapshot),
        ResponseEvent(type="response.in_progress", response=snapshot),
        *reasoning_added(rid),
    ]
    reasoning, parts, thinking, final, batch = [], [], True, None, []
    try:
        async for e in events:
            if isinstance(e, FinalEvent):
                final = e
                continue
            if e.reasoning_text:
                reasoning.append(e.reasoning_text)
                batch.append(ReasoningDelta(0, rid, e.reasoning_text))
            if thinking and not e.reasoning:  # the think block closed in these tokens
                thinking = False
                batch += reasoning_done(rid, "".join(reasoning), "completed") + _message_added(mid)
            if e.text:
                parts.append(e.text)
                batch.append(TextDelta(0, mid, e.text, MESSAGE_INDEX))
            if (
                batch and not events.pending()
            ):  # what is ready leaves in one write; the final's step: in the tail
                yield batch
                batch = []
    finally:
        if final is None:
            abandon()
        await events.aclose()
    tail: list = batch
    if (
        thinking and final.reasoning_tail
    ):  # text the decoder held back (an incomplete character) until the end
        reasoning.append(final.reasoning_tail)
        tail.append(ReasoningDelta(0, rid, final.reasoning_tail))
    if not thinking and final.tail_text:
        parts.append(final.tail_text)
        tail.append(TextDelta(0, mid, final.tail_text, MESSAGE_INDEX))
    text, thought = "".join(parts), "".join(reasoning)
    resp = snapshot.finished(final, mid, text, rid, thought, closed=not thinking)
    status = resp.output[0].status
    tail += (
        reasoning_done(rid, thought, status)
        if thinking
        else _message_done(mid, text, resp.output[-1].status)
    )
    yield tail + terminal(final, resp)
