"""The event stream of a response whose answer may hold function calls: the head, then (thinking
on) the reasoning item's events, then the answer's items as the Task's text is parsed
(tool_output.py: message text deltas, and per call `output_item.added`, argument deltas as
generated, `.done`, `output_item.done`), then the terminal events. Nothing of an item is sent
before the parser knows what the text is, so a call's markers never reach a text delta."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from qualflow.runtime import FinalEvent

from .protocol.events import Event, ResponseEvent
from .protocol.reasoning import ReasoningDelta
from .protocol.responses import Response
from .reasoning_stream import reasoning_added, reasoning_done
from .tool_output import ToolOutput


async def tool_stream(
    p, snapshot: Response, events, parser, terminal: Callable[[FinalEvent, Response], list[Event]]
) -> AsyncIterator[list]:
    """The stream as lists of events (numbered by the caller). `p`: the handler's Prepared
    request; `events`: its Task events; `parser`: the Task's tool-call parser for it."""
    rid = p.reasoning_id
    head = [
        ResponseEvent(type="response.created", response=snapshot),
        ResponseEvent(type="response.in_progress", response=snapshot),
    ]
    yield head + (reasoning_added(rid) if rid is not None else [])
    out = ToolOutput(parser, 0 if rid is None else 1, p.message_id)
    reasoning, thinking, final, batch = [], rid is not None, None, []
    async for e in events:
        if isinstance(e, FinalEvent):
            final = e
            break
        if e.reasoning_text:
            reasoning.append(e.reasoning_text)
            batch.append(ReasoningDelta(0, rid, e.reasoning_text))
        if thinking and not e.reasoning:
            thinking = False
            batch += reasoning_done(rid, "".join(reasoning), "completed")
        batch += out.push(e.text)
        if batch and not events.pending():
            yield batch
            batch = []
    tail = batch
    if thinking and final.reasoning_tail:
        reasoning.append(final.reasoning_tail)
        tail.append(ReasoningDelta(0, rid, final.reasoning_tail))
    resp = snapshot.finished(final, p.message_id, "", rid, "".join(reasoning), closed=not thinking)
    status = "completed" if resp.status == "completed" else "incomplete"
    if thinking:  # cut inside the think block: no answer
        tail += reasoning_done(rid, "".join(reasoning), status)
    else:
        tail += out.push(final.tail_text or "") + out.finish(status)
        resp.output = [i for i in resp.output if i.type == "reasoning"] + out.items
    p.record.tool_calls = out.calls
    yield tail + terminal(final, resp)
