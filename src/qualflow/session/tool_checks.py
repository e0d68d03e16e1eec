"""The protocol checks of function tools, for a stack that serves them: our server when its /health
lists the `tools` capability, an endpoint when its model's config says `tools: true`. With the real
`openai` SDK and its types, like session.conformance:

- a `required` call is a `function_call` item (ids fc_… / call_…, the name, `arguments` a JSON
  object, status completed) whose arguments validate against the strict tool's schema (jsonschema);
- the stream of a call: `output_item.added` (in_progress, `arguments: ""`), then
  `function_call_arguments.delta` × n joining to the `.done`'s arguments, then `output_item.done`
  (completed), and no `content_part` events for calls;
- a `function_call_output` round trip (the call, its output, then an answer) is accepted, the
  call and its output rendered into the prompt;
- `parallel_tool_calls: false` gives at most one call;
- the rejections: a `tool_choice` naming a function not in `tools`, a schema that is not an
  object, a
  `function_call_output` whose `call_id` names no call (each a 400 naming its field)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import jsonschema

from .conformance import PROMPT, Checker, CheckFailed

MAX_TOKENS = 64  # room for a call of WEATHER (its arguments are short by their schema)
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city, for some days.",
    "strict": True,
    "parameters": {
        "type": "object",
        "additionalProperties": False,
        "required": ["city", "days"],
        "properties": {
            "city": {"type": "string", "enum": ["Paris", "Oslo", "Lima"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 9},
        },
    },
}
# (name, request overrides, expected error param)
TOOL_REJECTIONS = (
    (
        "tools_reject_unknown_function_choice",
        {"tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}},
        "tool_choice.name",
    ),
    (
        "tools_reject_non_object_schema",
        {"tools": [{**WEATHER, "strict": False, "parameters": {"type": "string"}}]},
        "tools[0].parameters",
    ),
    (
        "tools_reject_unknown_call_id",
        {
            "tools": [WEATHER],
            "input": [
                {"role": "user", "content": PROMPT},
                {"type": "function_call_output", "call_id": "call_unknown", "output": "{}"},
            ],
        },
        "input[1].call_id",
    ),
)


@dataclass(frozen=True)
class ToolSupport:
    required: bool = True  # the stack constrains `required` calls (the strict check runs)


def tool_support(health: dict, endpoint=None, tools: bool = False) -> ToolSupport | None:
    """Whether the stack serves function tools: an endpoint when its config says so (`tools`), our
    server when its /health lists the `tools` capability."""
    if endpoint is not None:
        return ToolSupport() if tools else None
    return ToolSupport() if "tools" in (health.get("capabilities") or ()) else None


def tool_checks(support: ToolSupport | None):
    """The `more` of conformance.run_protocol_checks: these checks where the stack serves tools."""
    return None if support is None else (lambda checker: ToolChecks(checker).checks())


def _expect(cond: bool, msg: str) -> None:
    if not cond:
        raise CheckFailed(msg)


def _calls(response) -> list:
    return [o for o in response.output if o.type == "function_call"]


def _check_call(call, schema: dict | None = None) -> dict:
    _expect(call.id.startswith("fc_"), f"function_call id {call.id!r} does not start with fc_")
    _expect(call.call_id.startswith("call_"), f"call_id {call.call_id!r} not call_…")
    _expect(call.name == WEATHER["name"], f"name={call.name!r}")
    _expect(call.status == "completed", f"function_call status={call.status!r}")
    try:
        args = json.loads(call.arguments)
    except ValueError as e:
        raise CheckFailed(f"arguments are not JSON ({e}): {call.arguments!r}") from None
    _expect(isinstance(args, dict), f"arguments are not a JSON object: {call.arguments!r}")
    if schema is not None:
        try:
            jsonschema.validate(args, schema)
        except jsonschema.ValidationError as e:
            raise CheckFailed(f"arguments {args} fail their schema: {e.message}") from None
    return args


class ToolChecks:
    def __init__(self, checker: Checker):
        self.c = checker
        self.client = checker.client

    def _create(self, rid: str, **kw):
        kw.setdefault("input", PROMPT)
        kw.setdefault("tools", [WEATHER])
        return self.client.responses.create(
            model=self.c.model,
            max_output_tokens=MAX_TOKENS,
            store=False,
            extra_headers=self.c._headers(rid),
            **kw,
        )

    def required_call(self, rid: str) -> str:
        r = self._create(rid, tool_choice="required")
        calls = _calls(r)
        _expect(r.status == "completed", f"status={r.status!r}")
        _expect(len(calls) >= 1, f"no function_call item in {[o.type for o in r.output]}")
        args = [_check_call(c, WEATHER["parameters"]) for c in calls]
        return f"{len(calls)} call(s), arguments {args} valid against the strict schema"

    def stream_call_events(self, rid: str) -> str:
        events = list(self._create(rid, tool_choice="required", stream=True))
        types = [e.type for e in events]
        _expect(types[-1] == "response.completed", f"last event {types[-1]!r}")
        _expect(not any("content_part" in t for t in types), f"content_part events: {types}")
        seq = [e.sequence_number for e in events]
        _expect(seq == list(range(seq[0], seq[0] + len(seq))), f"sequence numbers {seq}")
        added = [e for e in events if e.type == "response.output_item.added"]
        _expect(added and added[0].item.type == "function_call", f"events {types}")
        for a in added:
            idx = a.output_index
            mine = [e for e in events if getattr(e, "output_index", None) == idx]
            kinds = [e.type for e in mine]
            _expect(a.item.status == "in_progress", f"added item status={a.item.status!r}")
            _expect(a.item.arguments == "", f"added item arguments={a.item.arguments!r}")
            deltas = [e.delta for e in mine if e.type == "response.function_call_arguments.delta"]
            done = [e for e in mine if e.type == "response.function_call_arguments.done"]
            last = mine[-1]
            _expect(len(deltas) >= 1 and len(done) == 1, f"call {idx}'s events: {kinds}")
            _expect("".join(deltas) == done[0].arguments, "deltas do not join to the .done")
            _expect(
                kinds.index("response.function_call_arguments.done")
                > kinds.index("response.function_call_arguments.delta"),
                f"call {idx}'s events: {kinds}",
            )
            _expect(last.type == "response.output_item.done", f"call {idx} ends with {kinds[-1]}")
            _expect(last.item.status == "completed", f"done item status={last.item.status!r}")
            _expect(last.item.arguments == done[0].arguments, "done item arguments differ")
            _check_call(last.item, WEATHER["parameters"])
        final = _calls(events[-1].response)
        _expect(len(final) == len(added), "the final response's calls differ from the stream's")
        return f"{len(added)} call(s) streamed, {len(events)} events, seq {seq[0]}..{seq[-1]}"

    def output_round_trip(self, rid: str) -> str:
        first = self._create(rid, tool_choice="required", parallel_tool_calls=False)
        calls = _calls(first)
        _expect(len(calls) == 1, f"{len(calls)} calls")
        call = calls[0]
        items = [
            {"role": "user", "content": PROMPT},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": '{"sky": "clear"}'},
        ]
        r = self._create(rid + ".2", input=items, tool_choice="auto")
        _expect(r.status in ("completed", "incomplete"), f"status={r.status!r}")
        _expect(
            r.usage.input_tokens > first.usage.input_tokens,
            "the call and its output were not rendered into the prompt",
        )
        return f"call {call.call_id} -> output -> status={r.status} {r.usage.output_tokens} tokens"

    def one_call_without_parallel(self, rid: str) -> str:
        r = self._create(rid, tool_choice="required", parallel_tool_calls=False)
        n = len(_calls(r))
        _expect(n == 1, f"{n} calls with parallel_tool_calls false")
        return "1 call"

    def checks(self) -> list[tuple[str, Callable[[str], str]]]:
        out = [
            ("tools_required_call_validates", self.required_call),
            ("tools_stream_call_events", self.stream_call_events),
            ("tools_function_call_output_round_trip", self.output_round_trip),
            ("tools_parallel_false_one_call", self.one_call_without_parallel),
        ]
        for name, overrides, param in TOOL_REJECTIONS:
            out.append((name, lambda rid, o=overrides, p=param: self.c.rejection(rid, o, p)))
        return out
