"""The family formats a Task serves, checked against its bundle's tokenizer: the thinking mode
(the family's ReasoningSpec) and the tool-call format (its ToolCallSpec). Each is the spec, or None
and the reason the Task cannot serve it (what the server's 400 says)."""

from __future__ import annotations


def thinking_mode(family, tokenizer):
    """(the family's ReasoningSpec, None) when the tokenizer has its delimiters where the family
    says; else (None, why not)."""
    spec = getattr(family, "reasoning", None)
    if spec is None:
        return None, f"the {family.name} family has no thinking mode"
    found = (tokenizer.id_to_token(spec.open_ids[0]), tokenizer.id_to_token(spec.end_id))
    if found != tuple(spec.delimiters):
        return None, (
            f"the bundle's tokenizer has {found} where the {family.name} family expects its "
            f"think delimiters {tuple(spec.delimiters)}"
        )
    return spec, None


def tool_format(family, tokenizer, synthetic: bool = False):
    """(the family's ToolCallSpec, None) when the Task can serve function tools; else (None, why
    not). `synthetic`: the Task runs the synthetic engine (no model to constrain)."""
    spec = getattr(family, "tool_calls", None)
    if spec is None:
        return None, f"the {family.name} family declares no tool-call format"
    if (why := spec.tokenizer_mismatch(tokenizer.id_to_token)) is not None:
        return None, f"the bundle's {why}"
    if synthetic:
        return None, "the synthetic engine cannot constrain or generate calls"
    return spec, None
