"""SSE framing of the stream's events: each is one frame, `event: <type>` + `data: <json>`. The hot
path's deltas (TextDelta, ReasoningDelta: no pydantic model) are framed by byte templates that give
the bytes their models would; a message's tail (MessageTail) is one frame per event it stands for,
from its own rendering."""

from __future__ import annotations

import orjson

from ..message_tail import MessageTail, event_json
from ..protocol.events import Event, TextDelta
from ..protocol.reasoning import ReasoningDelta

# a delta's output_index: the message is output 0, or 1 after a reasoning item
_INDEX = (b"0", b"1")


def _text_delta(e: TextDelta) -> bytes:
    return b"".join(
        (
            b"event: response.output_text.delta\n"
            b'data: {"type":"response.output_text.delta",'
            b'"sequence_number":',
            str(e.sequence_number).encode(),
            b',"item_id":"',
            e.item_id.encode(),
            b'","output_index":',
            _INDEX[e.output_index],
            b',"content_index":0,"delta":',
            orjson.dumps(e.delta),
            b',"logprobs":[]}\n\n',
        )
    )


def _reasoning_delta(e: ReasoningDelta) -> bytes:
    return b"".join(
        (
            b"event: response.reasoning_text.delta\n"
            b'data: {"type":"response.reasoning_text.delta",'
            b'"sequence_number":',
            str(e.sequence_number).encode(),
            b',"item_id":"',
            e.item_id.encode(),
            b'","output_index":0,"content_index":0,"delta":',
            orjson.dumps(e.delta),
            b"}\n\n",
        )
    )


def sse_frame(e: Event | TextDelta | ReasoningDelta | MessageTail) -> bytes:
    """One SSE frame: `event: <type>` + `data: <json>` (a MessageTail: one per event)."""
    if isinstance(e, TextDelta):
        return _text_delta(e)
    if isinstance(e, ReasoningDelta):
        return _reasoning_delta(e)
    if isinstance(e, MessageTail):
        return b"".join(_frame(t, data) for t, data in e.rendered())
    return _frame(e.type, event_json(e))


def _frame(event_type: str, data: bytes) -> bytes:
    return b"".join((b"event: ", event_type.encode(), b"\ndata: ", data, b"\n\n"))
