"""The stream's events, in the order a stream sends them: `response.created` / `.in_progress`
(ResponseEvent), `output_item.added`, `content_part.added`, the text deltas, `output_text.done`,
`content_part.done`, `output_item.done`, then the terminal ResponseEvent (after an ErrorEvent for a
failed response). The caller numbers them (`sequence_number`); the HTTP layer frames them as SSE."""

from __future__ import annotations

from pydantic import BaseModel, Field

from .reasoning import ReasoningItem, ReasoningText
from .responses import FunctionCallItem, OutputMessage, OutputText, Response


class Event(BaseModel):
    type: str
    sequence_number: int = 0


class ResponseEvent(Event):  # created / in_progress / completed / incomplete / failed
    response: Response


class OutputItemEvent(Event):  # output_item.added / .done
    output_index: int = 0
    item: OutputMessage | ReasoningItem | FunctionCallItem


class ContentPartEvent(Event):  # content_part.added / .done
    item_id: str
    output_index: int = 0
    content_index: int = 0
    part: OutputText | ReasoningText


class TextDelta:
    """`response.output_text.delta` on the hot path: no model, framed by a byte template
    (http.sse). Same wire form as `TextDeltaEvent`."""

    __slots__ = ("sequence_number", "item_id", "delta", "output_index")
    type = "response.output_text.delta"
    content_index = 0

    def __init__(self, sequence_number: int, item_id: str, delta: str, output_index: int = 0):
        self.sequence_number, self.item_id, self.delta = sequence_number, item_id, delta
        self.output_index = output_index


class TextDeltaEvent(Event):
    type: str = "response.output_text.delta"
    item_id: str
    output_index: int = 0
    content_index: int = 0
    delta: str
    logprobs: list = Field(default_factory=list)


class TextDoneEvent(Event):
    type: str = "response.output_text.done"
    item_id: str
    output_index: int = 0
    content_index: int = 0
    text: str
    logprobs: list = Field(default_factory=list)


class CallArgumentsDelta(Event):
    type: str = "response.function_call_arguments.delta"
    item_id: str
    output_index: int = 0
    delta: str


class CallArgumentsDone(Event):
    type: str = "response.function_call_arguments.done"
    item_id: str
    output_index: int = 0
    name: str
    arguments: str


class ErrorEvent(Event):
    """Live OpenAI nests the error; the spec documents flat fields. We send both, so a client of
    either reads it."""

    type: str = "error"
    code: str | None = None
    message: str
    param: str | None = None
    error: dict
