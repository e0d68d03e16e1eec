"""What this server supports of a request, before anything is queued: `check_supported` (the
server-level reject table: fields whose requested behaviour a stateless, text-only server cannot
honour; tools and `text.format` are checked by protocol.tools and server.tools) and
`request_features` (the features a request asks for, which the family may not support)."""

from __future__ import annotations

from .protocol.errors import ApiError, bad_request
from .protocol.requests import CreateResponse
from .thinking import asks_for_reasoning, check_include


def unsupported(param: str, what: str, code: str = "unsupported_parameter") -> ApiError:
    return bad_request(
        f"Unsupported parameter: '{param}' {what}. This server is stateless, "
        "single-turn and text-only.",
        param,
        code,
    )


def check_supported(req: CreateResponse) -> None:
    """The server-level reject table: fields whose requested behaviour this server cannot honour."""
    if req.previous_response_id is not None:
        raise bad_request(
            f"Previous response with id '{req.previous_response_id}' not found.",
            "previous_response_id",
            "previous_response_not_found",
        )
    for name in ("conversation", "prompt", "context_management", "moderation"):
        if getattr(req, name) is not None:
            raise unsupported(
                name, "is not supported (it needs server-side state or features we do not have)"
            )
    if req.background:
        raise unsupported(
            "background", "must be false: nothing can be polled later", "unsupported_value"
        )
    check_include(req)
    if req.include:
        raise unsupported(
            "include", "must be empty: no includable output data exists", "unsupported_value"
        )
    if req.top_logprobs:
        raise unsupported(
            "top_logprobs", "must be 0: logprobs are not supported", "unsupported_value"
        )
    if req.truncation == "auto":
        raise unsupported(
            "truncation",
            "must be 'disabled': prompts over the context limit are refused",
            "unsupported_value",
        )
    md = req.metadata or {}
    if len(md) > 16 or any(len(k) > 64 or len(v) > 512 for k, v in md.items()):
        raise bad_request(
            "Invalid 'metadata': at most 16 keys, keys up to 64 and values up to 512 characters.",
            "metadata",
            "invalid_value",
        )


def request_features(req: CreateResponse, messages: list[dict]) -> dict[str, str]:
    """Features this request asks for, by the names families use in `unsupported_features`,
    each mapped to the param that asks for it."""
    f = {}
    if asks_for_reasoning(req):
        f["reasoning"] = "reasoning"
    if req.instructions is not None:
        f["instructions"] = "instructions"
    if any(m.get("role") in ("system", "developer") for m in messages):
        f["system_messages"] = "input"
    if any(m.get("role") == "assistant" or "type" in m for m in messages):
        f["multi_turn"] = "input"
    for name in ("temperature", "top_p", "ignore_eos", "min_tokens"):
        if getattr(req, name) is not None:
            f[name] = name
    return f
