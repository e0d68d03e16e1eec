"""A request's `reasoning` (and `include`) mapped onto the Task: thinking on or off, and its budget.

- No `reasoning`, or every field of it null: the family's default (qwen3: off), exactly as before.
- `effort`: `none` is thinking off; an effort the family gives a budget for (minimal, low, medium,
  high) turns thinking on with that budget (family data; the server's --reasoning-budgets overrides
  it); any other effort is a 400 naming `reasoning.effort`.
- `summary` / `generate_summary`: no summaries are made, so any value is a 400 naming the field.
- `context`: single-turn, so `auto` and `current_turn` change nothing; `all_turns` is a 400.
- `mode`: `standard` only.
- `include` with `reasoning.encrypted_content`: nothing is encrypted (the reasoning text is sent in
  the clear), a 400 naming `include`.
A Task without the `reasoning` capability answers a request that asks for thinking with a 400 naming
`reasoning` and the family's reason (the handler checks that first: `wants_thinking`)."""

from __future__ import annotations

from typing import Any

from qualflow.runtime import Thinking

from .protocol.errors import ApiError, bad_request
from .protocol.requests import CreateResponse

ENCRYPTED = ("reasoning.encrypted_content", "encrypted_content")


def _unsupported(param: str, what: str, code: str = "unsupported_value") -> ApiError:
    return bad_request(f"Unsupported value for '{param}': {what}.", param, code)


def check_include(req: CreateResponse) -> None:
    for value in req.include or ():
        if value in ENCRYPTED:
            raise _unsupported(
                "include",
                f"'{value}' cannot be included: this server keeps no encrypted "
                "reasoning (the reasoning text is sent as reasoning_text)",
            )


def asks_for_reasoning(req: CreateResponse) -> bool:
    """The request sets some field of `reasoning`."""
    r = req.reasoning
    return r is not None and any(v is not None for v in r.model_dump().values())


def _check_options(req: CreateResponse) -> None:
    r = req.reasoning
    for name in ("summary", "generate_summary"):
        if getattr(r, name) is not None:
            raise _unsupported(
                f"reasoning.{name}",
                "reasoning summaries are not produced (the reasoning item "
                "carries the model's own reasoning_text)",
            )
    if r.context == "all_turns":
        raise _unsupported(
            "reasoning.context",
            "'all_turns' needs earlier turns' reasoning, which this "
            "stateless server never takes back",
        )
    if r.mode not in (None, "standard"):
        raise _unsupported("reasoning.mode", f"{r.mode!r}; only 'standard' is served")


def wants_thinking(req: CreateResponse) -> bool:
    """The request asks for thinking on (an effort other than `none`)."""
    return asks_for_reasoning(req) and req.reasoning.effort not in (None, "none")


def thinking_for(
    req: CreateResponse, task: Any, budgets: tuple[int, ...] | None = None
) -> Thinking | None:
    """The Task's Thinking for this request (None: thinking off); the Task has the capability
    where the request asks for thinking. `budgets`: the server's override, one per effort (0:
    unbounded)."""
    spec = getattr(task, "reasoning", None)
    if not asks_for_reasoning(req):
        effort = spec.default_effort if spec is not None else None
    else:
        _check_options(req)
        effort = req.reasoning.effort
    if effort is None or effort == "none":
        return None
    if effort not in spec.budgets:
        raise bad_request(
            f"Invalid value for 'reasoning.effort': {effort!r} is not served; the "
            f"{task.family.name} "
            f"family supports {['none', *spec.budgets]}.",
            "reasoning.effort",
            "unsupported_value",
        )
    return Thinking(spec.budget(effort, budgets))
