"""The event stream of a response without thinking: the head (`response.created`, `.in_progress`,
the message's `output_item.added` and `content_part.added`), one batch of text deltas per Task token
event, then the tail (the `*.done` events and the terminal events, `terminal_events`, which the
stream with thinking ends with too)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from qualflow.runtime import FinalEvent

from .protocol.events import (
    ContentPartEvent,
    ErrorEvent,
    Event,
    OutputItemEvent,
    ResponseEvent,
    TextDelta,
    TextDoneEvent,
)
from .protocol.responses import OutputMessage, OutputText, Response


async def message_stream(p, snapshot: Response, events) -> AsyncIterator[list]:
    """The stream as lists of events (numbered by the caller): head, one list per Task token event,
    tail. `p`: the handler's Prepared request; `events`: its Task events
    (task_events.RequestEvents)."""
    item_id = p.message_id
    ids = dict(item_id=item_id)
    yield [
        ResponseEvent(type="response.created", response=snapshot),
        ResponseEvent(type="response.in_progress", response=snapshot),
        OutputItemEvent(type="response.output_item.added", item=OutputMessage.of(item_id, None)),
        ContentPartEvent(type="response.content_part.added", part=OutputText(), **ids),
    ]
    parts, final, held = [], None, []
    async for e in events:
        if isinstance(e, FinalEvent):
            final = e
            break
        if e.text:
            parts.append(e.text)
            held.append(TextDelta(0, item_id, e.text))
        # what is ready leaves in one write; the final's step: in the tail
        if held and not events.pending():
            yield held
            held = []
    tail = held
    if final.tail_text:  # text the decoder held back (an incomplete character) until the end
        parts.append(final.tail_text)
        tail.append(TextDelta(0, item_id, final.tail_text))
    text = "".join(parts)
    resp = snapshot.finished(final, item_id, text)
    (message,) = resp.output  # the done events carry the response's own message and text part
    tail += [
        TextDoneEvent(text=text, **ids),
        ContentPartEvent(type="response.content_part.done", part=message.content[0], **ids),
        OutputItemEvent(type="response.output_item.done", item=message),
    ]
    yield tail + terminal_events(final, resp)


def terminal_events(final: FinalEvent, resp: Response) -> list[Event]:
    """The stream's last events: an `error` event for a failed response, then
    `response.<status>`."""
    out: list[Event] = []
    if resp.status == "failed":
        if final.finish_reason == "cancelled" and not final.error:
            resp.error["message"] = "request cancelled"
        err = {
            "type": "server_error",
            "code": "server_error",
            "message": resp.error["message"],
            "param": None,
        }
        out.append(ErrorEvent(code="server_error", message=err["message"], error=err))
    out.append(ResponseEvent(type=f"response.{resp.status}", response=resp))
    return out
