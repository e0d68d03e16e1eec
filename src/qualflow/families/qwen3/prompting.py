"""Responses-style input (instructions + messages) -> prompt token ids through the bundle's chat
template."""

from __future__ import annotations

from functools import lru_cache

from jinja2.sandbox import ImmutableSandboxedEnvironment

ROLE_MAP = {"developer": "system", "system": "system", "user": "user", "assistant": "assistant"}


@lru_cache(maxsize=8)
def _compile(template: str):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template)


def render_text(
    chat_template: str, instructions: str | None, messages: list[dict], **settings
) -> str:
    """System content (instructions, then system/developer messages) is merged into one leading
    system turn, as the Qwen3 template expects; other turns keep their order."""
    system = [instructions] if instructions else []
    turns = []
    for m in messages:
        role = ROLE_MAP.get(m["role"])
        if role is None:
            raise ValueError(f"unsupported role {m['role']!r}")
        (
            system.append(m["content"])
            if role == "system"
            else turns.append({"role": role, "content": m["content"]})
        )
    if system:
        turns.insert(0, {"role": "system", "content": "\n\n".join(system)})
    return _compile(chat_template).render(messages=turns, add_generation_prompt=True, **settings)


def render_ids(
    tokenizer, chat_template: str, instructions: str | None, messages: list[dict], **settings
) -> list[int]:
    text = render_text(chat_template, instructions, messages, **settings)
    return tokenizer.encode(text, add_special_tokens=False).ids
