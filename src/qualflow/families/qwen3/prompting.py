"""Responses-style input (instructions + items, and function tools) -> prompt token ids through the
bundle's chat template, rendered as transformers' `apply_chat_template` renders it."""

from __future__ import annotations

import json
from functools import lru_cache

from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..prompt_frame import Frames
from ..tools import template_messages, template_tool

ROLE_MAP = {"developer": "system", "system": "system", "user": "user", "assistant": "assistant"}


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False) -> str:
    """transformers' `tojson` (not jinja's, which sorts keys and escapes HTML characters)."""
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


FRAMES = Frames()


@lru_cache(maxsize=8)
def _compile(template: str):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = _tojson
    return env.from_string(template)


def render_text(
    chat_template: str,
    instructions: str | None,
    messages: list[dict],
    tools: list[dict] | None = None,
    **settings,
) -> str:
    """System content (instructions, then system/developer messages) is merged into one leading
    system turn, as the Qwen3 template expects; other turns keep their order. `messages`: the input
    items (messages, function_call and function_call_output items, families/tools.py); `tools`:
    Responses function tools, rendered into the system turn by the template."""
    system = [instructions] if instructions else []
    rest = []
    for m in messages:
        is_system = m.get("type", "message") == "message" and ROLE_MAP.get(m["role"]) == "system"
        (system.append(m["content"]) if is_system else rest.append(m))
    turns = template_messages(rest, ROLE_MAP)
    system_text = "\n\n".join(system) if system else None
    if not tools and len(turns) == 1 and turns[0]["role"] == "user":
        fast = _framed(chat_template, system_text, turns[0], settings)
        if fast is not None:
            return fast
    if system_text is not None:
        turns.insert(0, {"role": "system", "content": system_text})
    extra = {"tools": [template_tool(t) for t in tools]} if tools else {}
    return _compile(chat_template).render(
        messages=turns, add_generation_prompt=True, **extra, **settings
    )


def _framed(chat_template: str, system: str | None, turn: dict, settings: dict) -> str | None:
    """One user turn of text (after a system turn or none), through the template's checked frame
    (prompt_frame); None where it has none."""
    if not isinstance(turn["content"], str):
        return None

    def render(sys_content: str | None, user: str) -> str:
        head = [] if sys_content is None else [{"role": "system", "content": sys_content}]
        turns = [*head, {"role": "user", "content": user}]
        return _compile(chat_template).render(
            messages=turns, add_generation_prompt=True, **settings
        )

    key = (chat_template, tuple(sorted(settings.items())))
    return FRAMES.fill(key, render, system, turn["content"])


def render_ids(
    tokenizer,
    chat_template: str,
    instructions: str | None,
    messages: list[dict],
    tools: list[dict] | None = None,
    **settings,
) -> list[int]:
    text = render_text(chat_template, instructions, messages, tools, **settings)
    return tokenizer.encode(text, add_special_tokens=False).ids
