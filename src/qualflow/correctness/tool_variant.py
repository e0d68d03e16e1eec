"""The `tools` correctness variant: each prompt as a turn that offered tools, called one and got its
output, rendered by our Task (`render_prompt(…, tools=…)` on Responses input items) and by the
family's reference (`apply_chat_template(messages, tools=…)` with the bundle's template, the same
conversation written as chat messages here, independently of the family's own conversion). The two
renderings must be equal token for token; the criteria then run on them as on any variant.

The variant's data is the family's (`correctness.yaml`, key `tools`): the function tools, the call
each prompt's turn makes (`name`, `arguments`: the JSON text) and the output it got."""

from __future__ import annotations


def tool_items(prompt: dict, data: dict) -> list[dict]:
    """The turn as Responses input items (what the server gives the Task)."""
    call = data["call"]
    return [
        {"role": "user", "content": prompt["input"]},
        {
            "type": "function_call",
            "call_id": "call_correctness",
            "name": call["name"],
            "arguments": call["arguments"],
        },
        {"type": "function_call_output", "call_id": "call_correctness", "output": data["output"]},
    ]


def reference_messages(prompt: dict, data: dict) -> list[dict]:
    """The same turn as Hugging Face chat messages (system, user, the assistant's tool_calls, the
    tool's output)."""
    call = data["call"]
    system = (
        [{"role": "system", "content": prompt["instructions"]}] if "instructions" in prompt else []
    )
    return system + [
        {"role": "user", "content": prompt["input"]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "type": "function",
                    "id": "call_correctness",
                    "function": {"name": call["name"], "arguments": call["arguments"]},
                }
            ],
        },
        {"role": "tool", "content": data["output"], "tool_call_id": "call_correctness"},
    ]


def reference_tools(data: dict) -> list[dict]:
    """The function tools in the chat-template shape (`{"type": "function", "function": …}`)."""
    return [
        {
            "type": "function",
            "function": {
                k: t[k] for k in ("name", "description", "parameters") if t.get(k) is not None
            },
        }
        for t in data["functions"]
    ]


def rendering_row(ours: list[int], ref: list[int]) -> dict:
    """The `rendering_equal` criterion: our prompt ids against the reference's."""
    same = next((i for i, (a, b) in enumerate(zip(ours, ref)) if a != b), min(len(ours), len(ref)))
    equal = ours == ref
    detail = (
        f"{len(ours)} ids, identical"
        if equal
        else f"first difference at id {same} (ours {len(ours)} ids, reference {len(ref)})"
    )
    return {
        "criterion": "rendering_equal",
        "measured": float(same),
        "threshold": float(len(ref)),
        "passed": equal,
        "detail": detail,
    }
