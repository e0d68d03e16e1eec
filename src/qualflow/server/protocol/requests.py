"""The request: `CreateResponse` (the POST /v1/responses body), validated strictly (unknown keys,
wrong types and out-of-range values are errors), and `parse_request`, which turns every failure into
a 400 `ApiError` in OpenAI's shape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from qualflow.runtime import SamplingParams

from .errors import bad_request, from_validation_error
from .reasoning import ReasoningParam

ServiceTier = Literal["auto", "default", "flex", "scale", "priority", "fast", "ultrafast"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TextConfig(_Strict):
    format: dict[str, Any] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


class CreateResponse(_Strict):
    """POST /v1/responses body. Every known field is listed so that unknown keys can be refused;
    which ones are honoured, ignored or rejected is decided by the handler
    (`supported.check_supported`, `thinking`)."""

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
    service_tier: ServiceTier | None = None
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

    def to_sampling_params(
        self, default_params: Callable[..., SamplingParams], room: int
    ) -> SamplingParams:
        """The Task's sampling parameters for this request; `room` is the context left after the
        prompt."""
        return default_params(
            max_new_tokens=self.max_output_tokens or max(1, room),
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            ignore_eos=bool(self.ignore_eos),
            min_tokens=self.min_tokens or 0,
        )


def parse_request(body: bytes | str | dict) -> CreateResponse:
    """Raw body -> CreateResponse, or ApiError(400) for malformed JSON, wrong types, unknown
    keys."""
    if not isinstance(body, dict):
        try:  # orjson: refuses lone surrogates, invalid UTF-8 and nesting over 1024 deep
            body = orjson.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise bad_request(
                f"We could not parse the JSON body of your request ({e}). "
                "The body must be a JSON object.",
                None,
                "invalid_json",
            ) from None
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.", None, "invalid_json")
    try:
        return CreateResponse.model_validate(body)
    except ValidationError as e:
        raise from_validation_error(e) from None
    except RecursionError:
        raise bad_request("The request body is nested too deeply.", None, "invalid_json") from None
