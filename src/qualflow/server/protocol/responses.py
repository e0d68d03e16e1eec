"""The response: `Response` (the request's configuration echoed, then completed by the Task's final
event), its output items (`OutputMessage` with `OutputText`, `FunctionCallItem`; the reasoning item
is in `reasoning`), `Usage`, and `FINAL_STATUS`, the Task's finish reason -> the Response's
status."""

from __future__ import annotations

import secrets
import time
from typing import Literal

from pydantic import BaseModel, Field

from qualflow.runtime import FinalEvent, SamplingParams

from .reasoning import ReasoningItem
from .requests import CreateResponse

# A cancelled generation is `failed` on the wire: OpenAI's `cancelled` is a background response's
FINAL_STATUS = {
    "stop": "completed",
    "length": "incomplete",
    "error": "failed",
    "cancelled": "failed",
}
Status = Literal["completed", "failed", "in_progress", "cancelled", "queued", "incomplete"]


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(25)}"


class OutputText(BaseModel):
    type: Literal["output_text"] = "output_text"
    text: str = ""
    annotations: list = Field(default_factory=list)
    logprobs: list = Field(default_factory=list)


class OutputMessage(BaseModel):
    id: str
    type: Literal["message"] = "message"
    status: Literal["in_progress", "completed", "incomplete"] = "in_progress"
    role: Literal["assistant"] = "assistant"
    content: list[OutputText] = Field(default_factory=list)

    @classmethod
    def of(cls, message_id: str, text: str | None, status: str = "in_progress") -> OutputMessage:
        return cls(
            id=message_id, status=status, content=[] if text is None else [OutputText(text=text)]
        )


class FunctionCallItem(BaseModel):
    """A call the model made: `arguments` is the JSON text of its arguments object."""

    id: str
    type: Literal["function_call"] = "function_call"
    status: Literal["in_progress", "completed", "incomplete"] = "in_progress"
    call_id: str
    name: str
    arguments: str = ""


class Usage(BaseModel):
    input_tokens: int
    input_tokens_details: dict = Field(
        default_factory=lambda: {"cached_tokens": 0, "cache_write_tokens": 0}
    )
    output_tokens: int
    output_tokens_details: dict = Field(default_factory=lambda: {"reasoning_tokens": 0})
    total_tokens: int


class Response(BaseModel):
    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Status = "in_progress"
    completed_at: int | None = None
    error: dict | None = None
    incomplete_details: dict | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    model: str
    output: list[ReasoningItem | OutputMessage | FunctionCallItem] = Field(default_factory=list)
    parallel_tool_calls: bool = True
    previous_response_id: str | None = None  # echoed by a stateful request (server.stateful)
    reasoning: dict = Field(default_factory=lambda: {"effort": None, "summary": None})
    store: bool = False
    background: bool = False
    temperature: float
    top_p: float
    presence_penalty: float = 0.0  # not supported: the neutral value the published types require
    frequency_penalty: float = 0.0
    text: dict = Field(default_factory=lambda: {"format": {"type": "text"}, "verbosity": "medium"})
    tool_choice: str | dict = "auto"
    tools: list = Field(default_factory=list)
    top_logprobs: int = 0
    truncation: str = "disabled"
    usage: Usage | None = None
    user: str | None = None
    metadata: dict = Field(default_factory=dict)
    service_tier: str = "default"
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None

    @classmethod
    def from_request(
        cls,
        r: CreateResponse,
        params: SamplingParams,
        response_id: str,
        created_at: int,
        model: str,
    ) -> Response:
        """The in-progress response: the request's configuration echoed."""
        text = {"format": {"type": "text"}, "verbosity": (r.text and r.text.verbosity) or "medium"}
        tools_parallel = True if r.parallel_tool_calls is None else r.parallel_tool_calls
        effort = r.reasoning.effort if r.reasoning else None
        return cls(
            id=response_id,
            created_at=created_at,
            model=model,
            instructions=r.instructions,
            max_output_tokens=r.max_output_tokens,
            max_tool_calls=r.max_tool_calls,
            temperature=params.temperature,
            top_p=params.top_p,
            parallel_tool_calls=tools_parallel,
            tool_choice=r.tool_choice or "auto",
            metadata=r.metadata or {},
            user=r.user,
            text=text,
            safety_identifier=r.safety_identifier,
            prompt_cache_key=r.prompt_cache_key,
            reasoning={"effort": effort, "summary": None},
        )

    def finished(
        self,
        final: FinalEvent,
        message_id: str,
        text: str | None = None,
        reasoning_id: str | None = None,
        reasoning: str | None = None,
        closed: bool | None = None,
    ) -> Response:
        """A copy completed by the Task's final event. `text`, `reasoning`: the output a stream sent
        (default the final's); a failed response keeps what was produced so far, as its `*.done`
        events did. With `reasoning_id` (thinking on) the reasoning item comes first, and the
        message only once the think block `closed` (default: as the final says)."""
        status = FINAL_STATUS.get(final.finish_reason, "failed")
        text = final.text if text is None else text
        resp = self.model_copy(
            update={
                "status": status,
                "usage": Usage(
                    input_tokens=final.prompt_tokens,
                    input_tokens_details={
                        "cached_tokens": final.timing.cached_tokens,
                        "cache_write_tokens": 0,
                    },
                    output_tokens=final.completion_tokens,
                    output_tokens_details={"reasoning_tokens": final.reasoning_tokens},
                    total_tokens=final.prompt_tokens + final.completion_tokens,
                ),
            }
        )
        if status == "completed":
            resp.completed_at = int(time.time())
        elif status == "incomplete":
            resp.incomplete_details = {"reason": "max_output_tokens"}
        else:
            resp.error = {"code": "server_error", "message": final.error or "generation failed"}
        item_status = "completed" if status == "completed" else "incomplete"
        resp.output = [OutputMessage.of(message_id, text, item_status)]
        if reasoning_id is not None:
            closed = final.reasoning_closed if closed is None else closed
            if reasoning is None:
                reasoning = final.reasoning_text or ""
            thought_status = "completed" if closed else item_status
            thought = ReasoningItem.of(reasoning_id, reasoning, thought_status)
            resp.output = [thought, *resp.output] if closed else [thought]
        return resp
