"""A family's thinking mode as data (`ReasoningSpec`): how a prompt is rendered with thinking on or
off, the think block's delimiters as token ids, the family's default, and a thinking budget per
effort.

A family that declares one (`<family>.reasoning`) gets the Task capability `reasoning`; a family
without one (`reasoning = None`) keeps answering a request for reasoning with a 400.

With thinking on, the rendered prompt ends with `open_ids` (the think block is opened in the
prompt), so every output token up to and including `end_id` is reasoning and every token after it
is the answer. When a request's budget is spent before the model closed the block itself, the
engine forces `close_ids` (which contain `end_id`) so that `end_id` is the budget's last token:
the reasoning of a request never exceeds its budget, and what follows `end_id` in `close_ids`
begins the answer."""

from __future__ import annotations

from dataclasses import dataclass, field

EFFORTS = ("minimal", "low", "medium", "high")  # the efforts a budget can be given for, in order


@dataclass(frozen=True)
class ReasoningSpec:
    template_on: dict  # chat-template settings with thinking on
    template_off: dict  # ... and off (what every request without reasoning is rendered with)
    open_ids: tuple[int, ...]  # the rendered prompt ends with these when thinking is on
    end_id: int  # the token that closes the think block
    close_ids: tuple[int, ...]  # forced when the budget is spent; holds end_id
    delimiters: tuple[str, str]  # what the first of open_ids and end_id are in the tokenizer
    budgets: dict = field(default_factory=dict)  # effort -> reasoning tokens (None: unbounded)
    default_effort: str | None = None  # thinking without a `reasoning` field; None: off

    def __post_init__(self):
        if self.end_id not in self.close_ids:
            raise ValueError("close_ids must hold end_id")
        if set(self.budgets) - set(EFFORTS):
            raise ValueError(f"budgets: unknown efforts {sorted(set(self.budgets) - set(EFFORTS))}")

    def budget(self, effort: str, overrides: tuple[int, ...] | None = None) -> int | None:
        """Reasoning tokens for `effort` (None: unbounded). `overrides`: one budget per EFFORTS
        entry, 0 meaning unbounded (the server's --reasoning-budgets)."""
        if overrides is not None:
            value = dict(zip(EFFORTS, overrides))[effort]
            return value or None
        return self.budgets[effort]

    @property
    def min_budget(self) -> int:
        """The smallest budget that leaves room for the forced close (up to its end-think token)."""
        return self.close_ids.index(self.end_id) + 1
