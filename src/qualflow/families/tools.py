"""A family's tool-call format as data (`ToolCallSpec`), as `ReasoningSpec` is its thinking mode:
the markers a call is written between and their token ids, the call's payload (a JSON object with
the function's name and its arguments), and how the chat template takes tools, assistant calls and
tool outputs (the Hugging Face chat-template conventions: `tools=[{"type": "function",
"function": …}]`, an assistant message's `tool_calls`, messages of role `tool`).

A family that declares one (`<family>.tool_calls`) can serve function tools; a family without one
(`tool_calls = None`) keeps answering a request with tools with a 400 (`no_tools_reason`).

Input items the renderers take, in order (what the server makes of a request's `input`):
  {"role": "user" | "assistant" | "system" | "developer", "content": str}
  {"type": "function_call", "call_id": str, "name": str, "arguments": str (JSON)}
  {"type": "function_call_output", "call_id": str, "output": str}
Function tools are the Responses API's: {"type": "function", "name", "description", "parameters",
"strict"}."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolCallSpec:
    open: str  # the marker a call starts with (one token)
    close: str  # ... and ends with
    open_id: int  # their ids in the family's tokenizer
    close_id: int
    name_key: str = "name"  # the payload: {name_key: <name>, arguments_key: <object>}
    arguments_key: str = "arguments"
    head: str = "\n"  # between the open marker and the payload
    tail: str = "\n"  # between the payload and the close marker
    between: str = "\n"  # between two consecutive calls
    output_role: str = "tool"  # the template's role of a tool output message

    def payload_head(self, name: str) -> str:
        """What the model writes from the open marker up to a call's arguments, as the template
        renders it: the marker, `head`, then the payload up to its arguments value."""
        payload = f'{{"{self.name_key}": {json.dumps(name)}, "{self.arguments_key}": '
        return self.open + self.head + payload

    def payload_tail(self) -> str:
        """What follows a call's arguments value, up to and including the close marker."""
        return f"}}{self.tail}{self.close}"

    def render_call(self, name: str, arguments: str) -> str:
        """One call as the model writes it (`arguments`: the JSON text of the arguments)."""
        return self.payload_head(name) + arguments + self.payload_tail()

    def tokenizer_mismatch(self, id_to_token) -> str | None:
        """Why a tokenizer does not carry this format's markers where the spec says (None: it does);
        `id_to_token`: the tokenizer's id -> token text."""
        found = (id_to_token(self.open_id), id_to_token(self.close_id))
        if found != (self.open, self.close):
            markers = (self.open, self.close)
            return f"the tokenizer has {found} where the tool-call markers {markers} should be"
        return None


def no_tools_reason(family) -> str | None:
    """Why `family` cannot serve function tools (what the server's 400 says); None: it can."""
    if getattr(family, "tool_calls", None) is None:
        return f"the {family.name} family declares no tool-call format"
    return None


def template_tool(tool: dict) -> dict:
    """A Responses function tool -> the chat template's tool entry (the chat-completions shape)."""
    function = {"name": tool["name"]}
    if tool.get("description") is not None:
        function["description"] = tool["description"]
    function["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def template_messages(items: list[dict], role_map: dict, output_role: str = "tool") -> list[dict]:
    """Input items -> the chat template's messages: a run of function_call items is one assistant
    turn's `tool_calls` (joined to the assistant message right before it, if any); each
    function_call_output is a message of `output_role`. `role_map`: input role -> template role."""
    out: list[dict] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call":
            call = {
                "type": "function",
                "id": item.get("call_id"),
                "function": {"name": item["name"], "arguments": item["arguments"]},
            }
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            out.append(
                {
                    "role": output_role,
                    "content": output_text(item["output"]),
                    "tool_call_id": item.get("call_id"),
                }
            )
        elif kind == "message":
            role = role_map.get(item["role"])
            if role is None:
                raise ValueError(f"unsupported role {item['role']!r}")
            out.append({"role": role, "content": item["content"]})
        else:
            raise ValueError(f"unsupported input item type {kind!r}")
    return out


def output_text(output) -> str:
    """A function_call_output's `output`: a string, or a list of text parts (joined)."""
    if isinstance(output, str):
        return output
    return "".join(part["text"] for part in output)
