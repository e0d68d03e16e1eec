"""The event stream of a response without thinking: the head (`response.created`, `.in_progress`,
the message's `output_item.added` and `content_part.added`), one batch of text deltas per Task token
event, then the tail (message_tail: the `*.done` events and the terminal events, `terminal_events`,
which the stream with thinking ends with too). The tail's templates are made once the first delta
is out, while the engine works on the next step: made before it, they held back the first token of
an engine that shares this process."""

from __future__ import annotations

from collections.abc import AsyncIterator

from qualflow.runtime import FinalEvent

from .message_tail import MessageTail, TailTemplates
from .protocol.events import ContentPartEvent, OutputItemEvent, ResponseEvent, TextDelta
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
    parts, final, held, templates = [], None, [], None
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
            if templates is None:  # the first delta is out: the engine is on the next step
                reason = TailTemplates.expected_reason(p.gen.params.ignore_eos)
                templates = TailTemplates(snapshot, item_id, reason)
    tail = held
    if final.tail_text:  # text the decoder held back (an incomplete character) until the end
        parts.append(final.tail_text)
        tail.append(TextDelta(0, item_id, final.tail_text))
    yield [*tail, MessageTail(snapshot, final, item_id, "".join(parts), templates)]
