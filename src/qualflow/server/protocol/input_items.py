"""The request's `input` as chat messages: a string, or a list of message items with text content,
and of `function_call` / `function_call_output` items (a tool call the model made and its result:
the family's template renders them). Any other item or content part type, an unknown key, a wrong
type, or a `function_call_output` whose `call_id` names no earlier `function_call` is a 400 naming
the offending param (`input[i].content[j].type`, `input[i].call_id`, ...)."""

from __future__ import annotations

import json

from .errors import bad_request

_MESSAGE_KEYS = {"type", "role", "content", "id", "status", "phase"}
_PART_KEYS = {
    "input_text": {"type", "text", "prompt_cache_breakpoint"},
    "output_text": {"type", "text", "annotations", "logprobs"},
}
_ROLES = ("user", "assistant", "system", "developer")
_CALL_KEYS = {  # item type -> (required string keys, optional keys)
    "function_call": (("call_id", "name", "arguments"), {"id", "status"}),
    "function_call_output": (("call_id", "output"), {"id", "status"}),
}


def _call_item(item: dict, at: str, calls: set) -> dict:
    """A function_call or function_call_output item, checked (`calls`: the call ids so far)."""
    kind = item["type"]
    required, optional = _CALL_KEYS[kind]
    for key in item:
        if key != "type" and key not in required and key not in optional:
            raise bad_request(
                f"Unknown parameter: '{at}.{key}'.", f"{at}.{key}", "unknown_parameter"
            )
    for key in required:
        value = item.get(key)
        if value is None:
            raise bad_request(
                f"Missing required parameter: '{at}.{key}'.",
                f"{at}.{key}",
                "missing_required_parameter",
            )
        if key == "output" and isinstance(value, list):
            value = _output_parts(value, f"{at}.output")
        elif not isinstance(value, str):
            raise bad_request(
                f"Invalid type for '{at}.{key}': expected a string.", f"{at}.{key}", "invalid_type"
            )
    if kind == "function_call":
        _check_arguments(item["arguments"], f"{at}.arguments")
        calls.add(item["call_id"])
        return {k: item[k] for k in ("type", *required)}
    if item["call_id"] not in calls:
        raise bad_request(
            f"No tool call found for function call output with call_id {item['call_id']!r}: "
            "an earlier 'function_call' input item must have it.",
            f"{at}.call_id",
            "invalid_value",
        )
    output = item["output"]
    text = output if isinstance(output, str) else _output_parts(output, f"{at}.output")
    return {"type": kind, "call_id": item["call_id"], "output": text}


def _check_arguments(arguments: str, at: str) -> None:
    try:
        value = json.loads(arguments)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise bad_request(
            f"Invalid '{at}': expected the JSON text of an object.", at, "invalid_value"
        )


def _output_parts(parts: list, at: str) -> str:
    texts = []
    for j, part in enumerate(parts):
        if not isinstance(part, dict) or part.get("type") != "input_text":
            raise bad_request(
                f"Invalid '{at}[{j}]': this server takes input_text parts only.",
                f"{at}[{j}].type",
                "unsupported_value",
            )
        if not isinstance(part.get("text"), str):
            raise bad_request(
                f"Invalid type for '{at}[{j}].text': expected a string.",
                f"{at}[{j}].text",
                "invalid_type",
            )
        texts.append(part["text"])
    return "".join(texts)


def input_messages(inp: str | list) -> list[dict]:
    """`input` -> [{"role", "content": str}]. Text only: any other item or part type is a 400."""
    if isinstance(inp, str):
        messages = [{"role": "user", "content": inp}]
    else:
        messages = _items(inp) if inp else []
    if not any(m.get("content") or m.get("type") for m in messages):
        raise bad_request(
            "Invalid 'input': expected a non-empty string or a list of message items "
            "with some text.",
            "input",
            "invalid_value",
        )
    return messages


def _items(inp: list) -> list[dict]:
    messages, calls = [], set()
    for i, item in enumerate(inp):
        at = f"input[{i}]"
        kind = item.get("type") if isinstance(item, dict) else None
        if isinstance(kind, str) and kind in _CALL_KEYS:  # a list there is unhashable
            messages.append(_call_item(item, at, calls))
            continue
        role, content = _check_item(item, at)
        if isinstance(content, str):
            messages.append({"role": role, "content": content})
            continue
        if not isinstance(content, list):
            raise bad_request(
                f"Invalid type for '{at}.content': expected a string or a list of content parts.",
                f"{at}.content",
                "invalid_type",
            )
        if not content:
            raise bad_request(
                f"Invalid '{at}.content': expected a non-empty list of content parts.",
                f"{at}.content",
                "invalid_value",
            )
        texts = [_part_text(part, role, f"{at}.content[{j}]") for j, part in enumerate(content)]
        messages.append({"role": role, "content": "".join(texts)})
    return messages


def _check_item(item, at: str) -> tuple:
    """A message item's (role, content), checked but for the content's parts."""
    if not isinstance(item, dict):
        raise bad_request(
            f"Invalid type for '{at}': expected a message object.", at, "invalid_type"
        )
    kind = item.get("type", "message")
    if kind != "message":
        raise bad_request(
            f"Input item type {kind!r} is not supported: this server takes message items "
            "with text content, function_call and function_call_output items only.",
            f"{at}.type",
            "unsupported_value",
        )
    for key in item:
        if key not in _MESSAGE_KEYS:
            raise bad_request(
                f"Unknown parameter: '{at}.{key}'.", f"{at}.{key}", "unknown_parameter"
            )
    for key in ("id", "status", "phase"):
        if key in item and not isinstance(item[key], str):
            raise bad_request(
                f"Invalid type for '{at}.{key}': expected a string.", f"{at}.{key}", "invalid_type"
            )
    role, content = item.get("role"), item.get("content")
    if role is None or content is None:
        missing = f"{at}.role" if role is None else f"{at}.content"
        raise bad_request(
            f"Missing required parameter: '{missing}'.", missing, "missing_required_parameter"
        )
    if role not in _ROLES:
        raise bad_request(
            f"Invalid value for '{at}.role': {role!r}; expected one of {list(_ROLES)}.",
            f"{at}.role",
            "invalid_value",
        )
    return role, content


def _part_text(part, role: str, pat: str) -> str:
    """A content part's text: input_text (any role) or output_text (assistant only)."""
    ptype = part.get("type") if isinstance(part, dict) else None
    allowed = ("input_text", "output_text") if role == "assistant" else ("input_text",)
    if ptype not in allowed:
        raise bad_request(
            f"Content part type {ptype!r} is not supported for role {role!r}: this "
            f"server is text-only and takes {' / '.join(allowed)} parts.",
            f"{pat}.type",
            "unsupported_value",
        )
    for key in part:
        if key not in _PART_KEYS[ptype]:
            raise bad_request(
                f"Unknown parameter: '{pat}.{key}'.", f"{pat}.{key}", "unknown_parameter"
            )
    if not isinstance(part.get("text"), str):
        raise bad_request(
            f"Invalid type for '{pat}.text': expected a string.", f"{pat}.text", "invalid_type"
        )
    return part["text"]
