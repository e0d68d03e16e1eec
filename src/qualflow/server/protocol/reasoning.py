"""Wire models of reasoning (the `reasoning` capability): the request's `reasoning` object, the
`reasoning` output item with its `reasoning_text` content, and the `response.reasoning_text.*`
events.
No other module is imported here (`requests` and `responses` use these in their models);
server.thinking maps the request onto the Task."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]


class ReasoningParam(BaseModel):
    """The request's `reasoning`: every field the Responses API defines, so unknown keys are
    refused; server.thinking decides which values are honoured."""

    model_config = ConfigDict(extra="forbid", strict=True)
    effort: Effort | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    # the deprecated name of summary
    generate_summary: Literal["auto", "concise", "detailed"] | None = None
    context: Literal["auto", "current_turn", "all_turns"] | None = None
    mode: str | None = None


class ReasoningText(BaseModel):
    type: Literal["reasoning_text"] = "reasoning_text"
    text: str = ""


class ReasoningItem(BaseModel):
    """The `reasoning` output item: the model's own thinking as `reasoning_text` (no summary)."""

    id: str
    type: Literal["reasoning"] = "reasoning"
    summary: list = Field(default_factory=list)
    content: list[ReasoningText] = Field(default_factory=list)
    status: Literal["in_progress", "completed", "incomplete"] = "in_progress"

    @classmethod
    def of(cls, item_id: str, text: str | None, status: str = "in_progress") -> ReasoningItem:
        return cls(
            id=item_id, status=status, content=[] if text is None else [ReasoningText(text=text)]
        )


class ReasoningDelta:
    """`response.reasoning_text.delta` on the hot path, framed by a byte template (http.sse), as
    TextDelta."""

    __slots__ = ("sequence_number", "item_id", "delta")
    type = "response.reasoning_text.delta"
    output_index = content_index = 0

    def __init__(self, sequence_number: int, item_id: str, delta: str):
        self.sequence_number, self.item_id, self.delta = sequence_number, item_id, delta


class ReasoningTextDone(BaseModel):
    type: str = "response.reasoning_text.done"
    sequence_number: int = 0
    item_id: str
    output_index: int = 0
    content_index: int = 0
    text: str
