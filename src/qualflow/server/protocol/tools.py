"""A request's function tools, `tool_choice`, `parallel_tool_calls` and `text.format`, validated
into `ToolRequest` (what the handler asks the Task for). Every error is a 400 naming the field:
a tool type other than `function` (`tools[i].type`), a name that is not a function name, a
duplicate, parameters that are not a JSON object schema (`tools[i].parameters`), a `tool_choice`
naming a function not in `tools`, a `text.format` of an unknown type or without its schema."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import bad_request

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_TOOL_KEYS = {"type", "name", "description", "parameters", "strict"}
_MODES = ("none", "auto", "required")


@dataclass(frozen=True)
class ToolRequest:
    """`tools`: the function tools offered (all rendered into the prompt); `mode`: none | auto |
    required; `allowed`: the tools a call may name (a named choice: one; allowed_tools: a
    subset); `parallel`: several calls allowed; `format`: the `text.format` (None: text)."""

    tools: tuple[dict, ...] = ()
    mode: str = "auto"
    allowed: tuple[dict, ...] = ()
    parallel: bool = True
    format: dict | None = None

    @property
    def calls(self) -> bool:
        """The model may call tools (they are rendered, its output parsed for calls)."""
        return bool(self.tools) and self.mode != "none"


def _invalid(message: str, param: str, code: str = "invalid_value"):
    return bad_request(message, param, code)


def parse_tools(tools: list[Any] | None) -> tuple[dict, ...]:
    out, names = [], set()
    for i, tool in enumerate(tools or []):
        at = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise _invalid(f"Invalid type for '{at}': expected an object.", at, "invalid_type")
        kind = tool.get("type")
        if kind != "function":
            raise _invalid(
                f"Tool type {kind!r} is not supported: this server serves function tools only.",
                f"{at}.type",
                "unsupported_value",
            )
        for key in tool:
            if key not in _TOOL_KEYS:
                raise _invalid(
                    f"Unknown parameter: '{at}.{key}'.", f"{at}.{key}", "unknown_parameter"
                )
        name = tool.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise _invalid(
                f"Invalid '{at}.name': {name!r}; expected 1 to 64 letters, digits, '_' or '-'.",
                f"{at}.name",
            )
        if name in names:
            raise _invalid(f"Duplicate function name {name!r} in 'tools'.", f"{at}.name")
        names.add(name)
        _check_schema(tool.get("parameters"), f"{at}.parameters")
        for key, kind in (("description", str), ("strict", bool)):
            if tool.get(key) is not None and not isinstance(tool[key], kind):
                raise _invalid(
                    f"Invalid type for '{at}.{key}': expected a {kind.__name__}.",
                    f"{at}.{key}",
                    "invalid_type",
                )
        out.append(tool)
    return tuple(out)


def _check_schema(schema, at: str) -> None:
    if schema is None:
        return
    if not isinstance(schema, dict):
        raise _invalid(f"Invalid '{at}': a JSON schema must be an object.", at, "invalid_type")
    if schema.get("type", "object") != "object":
        raise _invalid(
            f"Invalid '{at}': the schema must be of type 'object', got {schema['type']!r}.", at
        )


def parse_choice(choice, tools: tuple[dict, ...]) -> tuple[str, tuple[dict, ...]]:
    """(mode, the tools a call may name)."""
    by_name = {t["name"]: t for t in tools}
    if choice is None or isinstance(choice, str):
        mode = choice or "auto"
        if mode not in _MODES:
            raise _invalid(
                f"Invalid value for 'tool_choice': {mode!r}; expected one of {list(_MODES)}.",
                "tool_choice",
            )
        if mode == "required" and not tools:
            raise _invalid("'tool_choice' is 'required' but no tools are given.", "tool_choice")
        return mode, tools
    kind = choice.get("type")
    if kind == "function":
        return "required", (_named(choice.get("name"), by_name, "tool_choice.name"),)
    if kind == "allowed_tools":
        mode = choice.get("mode", "auto")
        if mode not in ("auto", "required"):
            raise _invalid(
                f"Invalid value for 'tool_choice.mode': {mode!r}; expected 'auto' or 'required'.",
                "tool_choice.mode",
            )
        listed = choice.get("tools")
        if not isinstance(listed, list) or not listed:
            raise _invalid(
                "'tool_choice.tools' must be a non-empty list of tools.", "tool_choice.tools"
            )
        allowed = []
        for j, t in enumerate(listed):
            at = f"tool_choice.tools[{j}]"
            if not isinstance(t, dict) or t.get("type") != "function":
                raise _invalid(f"'{at}' must be a function tool.", f"{at}.type")
            allowed.append(_named(t.get("name"), by_name, f"{at}.name"))
        return mode, tuple(allowed)
    raise _invalid(
        f"Invalid value for 'tool_choice.type': {kind!r}; expected 'function' or 'allowed_tools'.",
        "tool_choice.type",
    )


def _named(name, by_name: dict, param: str) -> dict:
    if name not in by_name:
        raise _invalid(
            f"Invalid '{param}': {name!r} is not a function in 'tools' "
            f"(the tools are {sorted(by_name)}).",
            param,
        )
    return by_name[name]


def parse_format(fmt: dict | None) -> dict | None:
    """`text.format` -> None (text) or {"type": "json_schema", "schema": …} / {"type":
    "json_object"}."""
    if fmt is None or fmt.get("type") == "text":
        return None
    kind = fmt.get("type")
    if kind == "json_object":
        return {"type": "json_object"}
    if kind != "json_schema":
        raise _invalid(
            f"Invalid value for 'text.format.type': {kind!r}; expected 'text', 'json_schema' "
            "or 'json_object'.",
            "text.format.type",
        )
    if "schema" not in fmt:
        raise _invalid(
            "Missing required parameter: 'text.format.schema'.",
            "text.format.schema",
            "missing_required_parameter",
        )
    if not isinstance(fmt["schema"], dict):
        raise _invalid(
            "Invalid 'text.format.schema': a JSON schema must be an object.",
            "text.format.schema",
            "invalid_type",
        )
    if not isinstance(fmt.get("name", ""), str):
        raise _invalid("Invalid 'text.format.name': expected a string.", "text.format.name")
    return {"type": "json_schema", "schema": fmt["schema"]}


def tool_request(req) -> ToolRequest:
    """The request's tools, choice, parallelism and output format, validated."""
    tools = parse_tools(req.tools)
    mode, allowed = parse_choice(req.tool_choice, tools)
    fmt = parse_format(req.text.format if req.text is not None else None)
    parallel = True if req.parallel_tool_calls is None else req.parallel_tool_calls
    if isinstance(req.tool_choice, dict) and req.tool_choice.get("type") == "function":
        parallel = False  # a named function: one call of it
    if fmt is not None and tools and mode != "none":
        raise _invalid(
            "'text.format' json_schema / json_object cannot be combined with tools this server "
            "may call: set 'tool_choice' to 'none' or drop 'tools'.",
            "text.format",
        )
    return ToolRequest(tools, mode, allowed, parallel, fmt)
