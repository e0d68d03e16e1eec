"""Wire models of the Responses API subset we serve (stateless, single-turn, text only).

Requests are validated strictly (unknown keys, wrong types and out-of-range values are errors);
`parse_request` turns every failure into an `ApiError` in OpenAI's shape with a string code and the
offending param. Responses and stream events are plain pydantic models rendered by the HTTP layer.
docs/server.md lists how each request field and stream event is handled, and why.
"""
from __future__ import annotations

import secrets
import time
from typing import Any, Callable, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from qualflow.runtime import FinalEvent, SamplingParams

from .reasoning import ReasoningDelta, ReasoningItem, ReasoningParam, ReasoningText


class ApiError(Exception):
    """An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.retry_after = retry_after   # seconds; set when a retry can succeed (429, 503 while loading)

    def headers(self) -> dict[str, str]:
        if self.retry_after is not None:
            return {"retry-after": str(int(self.retry_after))}
        return {"x-should-retry": "false"} if self.status >= 500 else {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad_request(message: str, param: str | None, code: str) -> ApiError:
    return ApiError(400, message, "invalid_request_error", param, code)


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(25)}"


# ---------------------------------------------------------------- request

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TextConfig(_Strict):
    format: dict[str, Any] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


class CreateResponse(_Strict):
    """POST /v1/responses body. Every known field is listed so that unknown keys can be refused;
    which ones are honoured, ignored or rejected is decided in `core.check_supported`."""
    # honoured
    model: str | None = Field(None, max_length=256)
    input: str | list[Any] | None = None
    instructions: str | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    stream: bool | None = None
    # non-OpenAI benchmark extensions (documented as such)
    ignore_eos: bool | None = None
    min_tokens: int | None = Field(None, ge=0)
    # accepted and ignored
    store: bool | None = None
    stream_options: dict[str, Any] | None = None
    metadata: dict[str, str] | None = None
    user: str | None = Field(None, max_length=256)
    safety_identifier: str | None = Field(None, max_length=64)
    prompt_cache_key: str | None = Field(None, max_length=256)
    prompt_cache_retention: str | None = Field(None, max_length=64)
    prompt_cache_options: dict[str, Any] | None = None
    service_tier: Literal["auto", "default", "flex", "scale", "priority", "fast", "ultrafast"] | None = None
    parallel_tool_calls: bool | None = None
    max_tool_calls: int | None = Field(None, ge=0)
    # accepted only at their default / "off" value
    truncation: Literal["auto", "disabled"] | None = None
    tools: list[Any] | None = None
    tool_choice: str | dict[str, Any] | None = None
    text: TextConfig | None = None
    reasoning: ReasoningParam | None = None
    include: list[str] | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    background: bool | None = None
    # rejected whenever set (need server-side state or features we do not have)
    previous_response_id: str | None = None
    conversation: str | dict[str, Any] | None = None
    prompt: dict[str, Any] | None = None
    context_management: list[Any] | None = None
    moderation: dict[str, Any] | None = None

    def to_sampling_params(self, default_params: Callable[..., SamplingParams], room: int) -> SamplingParams:
        """The Task's sampling parameters for this request; `room` is the context left after the prompt."""
        return default_params(
            max_new_tokens=self.max_output_tokens or max(1, room),
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p, ignore_eos=bool(self.ignore_eos),
            min_tokens=self.min_tokens or 0)


def _param(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "list[any]", "dict[str,any]", "function-after[...]") or "[" in str(part):
            continue  # union member tags pydantic puts into loc
        else:
            out += ("." if out else "") + str(part)
    return out


def _from_validation_error(e: ValidationError) -> ApiError:
    err = e.errors(include_url=False)[0]
    param, kind, ctx = _param(err["loc"]), err["type"], err.get("ctx") or {}
    if kind == "extra_forbidden":
        return bad_request(f"Unknown parameter: '{param}'.", param, "unknown_parameter")
    if kind == "missing":
        return bad_request(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        op, bound = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=",
                     "less_than": "<"}[kind], next(iter(ctx.values()), None)
        number, below = "decimal" if isinstance(bound, float) else "integer", kind.startswith("greater")
        return bad_request(
            f"Invalid '{param}': {number} {'below minimum' if below else 'above maximum'} value. "
            f"Expected a value {op} {bound}, but got {err.get('input')!r} instead.",
            param, f"{number}_{'below_min' if below else 'above_max'}_value")
    if kind == "string_too_long":
        limit = ctx.get("max_length")
        return bad_request(f"Invalid '{param}': string too long. Expected a string with maximum length {limit}, "
                           f"but got a string with length {len(err.get('input') or '')} instead.", param,
                           "string_above_max_length")
    if kind == "literal_error":
        return bad_request(f"Invalid value for '{param}': {err['msg']}.", param, "invalid_value")
    return bad_request(f"Invalid type for '{param}': {err['msg']}.", param, "invalid_type")


def parse_request(body: bytes | str | dict) -> CreateResponse:
    """Raw body -> CreateResponse, or ApiError(400) for malformed JSON, wrong types, unknown keys."""
    if not isinstance(body, dict):
        try:   # orjson: refuses lone surrogates, invalid UTF-8 and nesting over 1024 deep
            body = orjson.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise bad_request(f"We could not parse the JSON body of your request ({e}). "
                              "The body must be a JSON object.", None, "invalid_json") from None
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.", None, "invalid_json")
    try:
        return CreateResponse.model_validate(body)
    except ValidationError as e:
        raise _from_validation_error(e) from None
    except RecursionError:
        raise bad_request("The request body is nested too deeply.", None, "invalid_json") from None


# ---------------------------------------------------------------- input items -> chat messages

_MESSAGE_KEYS = {"type", "role", "content", "id", "status", "phase"}
_PART_KEYS = {"input_text": {"type", "text", "prompt_cache_breakpoint"},
              "output_text": {"type", "text", "annotations", "logprobs"}}
_ROLES = ("user", "assistant", "system", "developer")


def input_messages(inp: str | list) -> list[dict]:
    """`input` -> [{"role", "content": str}]. Text only: any other item or part type is a 400."""
    messages = [{"role": "user", "content": inp}] if isinstance(inp, str) else _items(inp) if inp else []
    if not any(m["content"] for m in messages):
        raise bad_request("Invalid 'input': expected a non-empty string or a list of message items with some "
                          "text.", "input", "invalid_value")
    return messages


def _items(inp: list) -> list[dict]:
    messages = []
    for i, item in enumerate(inp):
        at = f"input[{i}]"
        if not isinstance(item, dict):
            raise bad_request(f"Invalid type for '{at}': expected a message object.", at, "invalid_type")
        kind = item.get("type", "message")
        if kind != "message":
            raise bad_request(f"Input item type {kind!r} is not supported: this server takes message items "
                              "with text content only.", f"{at}.type", "unsupported_value")
        for key in item:
            if key not in _MESSAGE_KEYS:
                raise bad_request(f"Unknown parameter: '{at}.{key}'.", f"{at}.{key}", "unknown_parameter")
        for key in ("id", "status", "phase"):
            if key in item and not isinstance(item[key], str):
                raise bad_request(f"Invalid type for '{at}.{key}': expected a string.", f"{at}.{key}",
                                  "invalid_type")
        role, content = item.get("role"), item.get("content")
        if role is None or content is None:
            missing = f"{at}.role" if role is None else f"{at}.content"
            raise bad_request(f"Missing required parameter: '{missing}'.", missing, "missing_required_parameter")
        if role not in _ROLES:
            raise bad_request(f"Invalid value for '{at}.role': {role!r}; expected one of {list(_ROLES)}.",
                              f"{at}.role", "invalid_value")
        if isinstance(content, str):
            messages.append({"role": role, "content": content})
            continue
        if not isinstance(content, list):
            raise bad_request(f"Invalid type for '{at}.content': expected a string or a list of content parts.",
                              f"{at}.content", "invalid_type")
        if not content:
            raise bad_request(f"Invalid '{at}.content': expected a non-empty list of content parts.",
                              f"{at}.content", "invalid_value")
        texts = []
        for j, part in enumerate(content):
            pat = f"{at}.content[{j}]"
            ptype = part.get("type") if isinstance(part, dict) else None
            allowed = ("input_text", "output_text") if role == "assistant" else ("input_text",)
            if ptype not in allowed:
                raise bad_request(f"Content part type {ptype!r} is not supported for role {role!r}: this server "
                                  f"is text-only and takes {' / '.join(allowed)} parts.", f"{pat}.type",
                                  "unsupported_value")
            for key in part:
                if key not in _PART_KEYS[ptype]:
                    raise bad_request(f"Unknown parameter: '{pat}.{key}'.", f"{pat}.{key}", "unknown_parameter")
            if not isinstance(part.get("text"), str):
                raise bad_request(f"Invalid type for '{pat}.text': expected a string.", f"{pat}.text", "invalid_type")
            texts.append(part["text"])
        messages.append({"role": role, "content": "".join(texts)})
    return messages


# ---------------------------------------------------------------- response

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
    def of(cls, message_id: str, text: str | None, status: str = "in_progress") -> "OutputMessage":
        return cls(id=message_id, status=status, content=[] if text is None else [OutputText(text=text)])


class Usage(BaseModel):
    input_tokens: int
    input_tokens_details: dict = Field(default_factory=lambda: {"cached_tokens": 0, "cache_write_tokens": 0})
    output_tokens: int
    output_tokens_details: dict = Field(default_factory=lambda: {"reasoning_tokens": 0})
    total_tokens: int


class Response(BaseModel):
    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Literal["completed", "failed", "in_progress", "cancelled", "queued", "incomplete"] = "in_progress"
    completed_at: int | None = None
    error: dict | None = None
    incomplete_details: dict | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    model: str
    output: list[ReasoningItem | OutputMessage] = Field(default_factory=list)
    parallel_tool_calls: bool = True
    previous_response_id: None = None
    reasoning: dict = Field(default_factory=lambda: {"effort": None, "summary": None})
    store: bool = False
    background: bool = False
    temperature: float
    top_p: float
    presence_penalty: float = 0.0    # not supported: the neutral value the published types require
    frequency_penalty: float = 0.0
    text: dict = Field(default_factory=lambda: {"format": {"type": "text"}, "verbosity": "medium"})
    tool_choice: str = "auto"
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
    def from_request(cls, r: CreateResponse, params: SamplingParams, response_id: str, created_at: int,
                     model: str) -> "Response":
        """The in-progress response: the request's configuration echoed."""
        text = {"format": {"type": "text"}, "verbosity": (r.text and r.text.verbosity) or "medium"}
        return cls(id=response_id, created_at=created_at, model=model, instructions=r.instructions,
                   max_output_tokens=r.max_output_tokens, max_tool_calls=r.max_tool_calls,
                   temperature=params.temperature, top_p=params.top_p,
                   parallel_tool_calls=True if r.parallel_tool_calls is None else r.parallel_tool_calls,
                   tool_choice=r.tool_choice or "auto", metadata=r.metadata or {}, user=r.user, text=text,
                   safety_identifier=r.safety_identifier, prompt_cache_key=r.prompt_cache_key,
                   reasoning={"effort": r.reasoning.effort if r.reasoning else None, "summary": None})

    def finished(self, final: FinalEvent, message_id: str, text: str | None = None, reasoning_id: str | None = None,
                 reasoning: str | None = None, closed: bool | None = None) -> "Response":
        """A copy completed by the Task's final event. `text`, `reasoning`: the output a stream sent (default
        the final's); a failed response keeps what was produced so far, as its `*.done` events did.
        With `reasoning_id` (thinking on) the reasoning item comes first, and the message only once the
        think block `closed` (default: as the final says)."""
        status = FINAL_STATUS.get(final.finish_reason, "failed")
        text = final.text if text is None else text
        resp = self.model_copy(update={"status": status, "usage": Usage(
            input_tokens=final.prompt_tokens, output_tokens=final.completion_tokens,
            output_tokens_details={"reasoning_tokens": final.reasoning_tokens},
            total_tokens=final.prompt_tokens + final.completion_tokens)})
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
            thought = ReasoningItem.of(reasoning_id, (final.reasoning_text or "") if reasoning is None else reasoning,
                                       "completed" if closed else item_status)
            resp.output = [thought, *resp.output] if closed else [thought]
        return resp


FINAL_STATUS = {"stop": "completed", "length": "incomplete", "error": "failed", "cancelled": "failed"}


# ---------------------------------------------------------------- stream events (sequence_number set by core)

class Event(BaseModel):
    type: str
    sequence_number: int = 0


class ResponseEvent(Event):          # created / in_progress / completed / incomplete / failed
    response: Response


class OutputItemEvent(Event):        # output_item.added / .done
    output_index: int = 0
    item: OutputMessage | ReasoningItem


class ContentPartEvent(Event):       # content_part.added / .done
    item_id: str
    output_index: int = 0
    content_index: int = 0
    part: OutputText | ReasoningText


_INDEX = (b"0", b"1")   # a delta's output_index: the message is output 0, or 1 after a reasoning item


class TextDelta:
    """`response.output_text.delta` on the hot path: no model, rendered by a byte template (`frame`).
    Same wire form as `TextDeltaEvent`."""
    __slots__ = ("sequence_number", "item_id", "delta", "output_index")
    type = "response.output_text.delta"
    content_index = 0

    def __init__(self, sequence_number: int, item_id: str, delta: str, output_index: int = 0):
        self.sequence_number, self.item_id, self.delta, self.output_index = sequence_number, item_id, delta, output_index

    def frame(self) -> bytes:
        return b"".join((b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
                         b'"sequence_number":', str(self.sequence_number).encode(), b',"item_id":"',
                         self.item_id.encode(), b'","output_index":', _INDEX[self.output_index],
                         b',"content_index":0,"delta":', orjson.dumps(self.delta), b',"logprobs":[]}\n\n'))


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


def sse_frame(e: "Event | TextDelta | ReasoningDelta") -> bytes:
    """One SSE frame: `event: <type>` + `data: <json>`."""
    if isinstance(e, (TextDelta, ReasoningDelta)):
        return e.frame()
    return b"".join((b"event: ", e.type.encode(), b"\ndata: ", e.__pydantic_serializer__.to_json(e), b"\n\n"))


class ErrorEvent(Event):
    """Live OpenAI nests the error; the spec documents flat fields. We send both, so a client of either reads it."""
    type: str = "error"
    code: str | None = None
    message: str
    param: str | None = None
    error: dict
