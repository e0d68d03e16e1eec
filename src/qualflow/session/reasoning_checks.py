"""The protocol checks of thinking (`reasoning: {effort}`), for a stack that serves it: our server
when its Task has the `reasoning` capability (/health says so, with its budgets), an endpoint when
its config says `reasoning: true`. With the real `openai` SDK and its types, like
session.conformance:

- the non-stream output is [reasoning item (reasoning_text content), message];
- the stream's events come in order (the reasoning item, its reasoning_text deltas and done, then
  the message's events) with consecutive sequence numbers and the right output indexes, and the
  SDK's stream helper accumulates them;
- a response cut by max_output_tokens inside the think block is `incomplete` (max_output_tokens)
  with no message text, and its `reasoning_tokens` equal the tokens it emitted (every one was
  reasoning);
- the budget of `minimal` is respected (when the stack states it);
- reasoning summaries and encrypted reasoning are refused with 400s naming the field."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from openai.types.responses import ResponseOutputMessage, ResponseReasoningItem

from .conformance import PROMPT, Checker, CheckFailed

CUT = 3  # max_output_tokens of the truncation checks: well inside any think block


@dataclass(frozen=True)
class ReasoningSupport:
    effort: str = "minimal"  # the effort the checks ask for
    budget: int | None = None  # the stack's budget (reasoning tokens) for it; None: not stated


def reasoning_support(health: dict, endpoint=None) -> ReasoningSupport | None:
    """Whether the stack serves thinking: an endpoint when its config says `reasoning: true`
    (with its `reasoning_budget`, if stated); our server when its /health lists the `reasoning`
    capability (with its budget for the effort the checks use)."""
    if endpoint is not None:
        return ReasoningSupport(budget=endpoint.reasoning_budget) if endpoint.reasoning else None
    if "reasoning" not in (health.get("capabilities") or ()):
        return None
    support = ReasoningSupport()
    return ReasoningSupport(
        budget=((health.get("reasoning") or {}).get("budgets") or {}).get(support.effort)
    )


def reasoning_checks(support: ReasoningSupport | None):
    """The `more` of conformance.run_protocol_checks: these checks where the stack serves
    thinking."""
    return None if support is None else (lambda checker: ReasoningChecks(checker, support).checks())


def _expect(cond: bool, msg: str) -> None:
    if not cond:
        raise CheckFailed(msg)


def _reasoning_text(item) -> str:
    return "".join(c.text for c in (item.content or []) if c.type == "reasoning_text")


class ReasoningChecks:
    def __init__(self, checker: Checker, support: ReasoningSupport):
        self.c, self.support = checker, support
        budget = support.budget
        self.max_tokens = (budget + 8) if budget is not None else 64

    def _create(self, rid: str, max_output_tokens: int, effort: str | None = None, **kw):
        extra = self.c.truncate_extra
        return self.c.client.responses.create(
            model=self.c.model,
            input=PROMPT,
            reasoning={"effort": effort or self.support.effort},
            max_output_tokens=max_output_tokens,
            store=False,
            extra_headers=self.c._headers(rid),
            **extra,
            **kw,
        )

    def non_stream(self, rid: str) -> str:
        r = self._create(rid, self.max_tokens)
        _expect(r.status in ("completed", "incomplete"), f"status={r.status!r}")
        _expect(
            len(r.output) >= 1 and isinstance(r.output[0], ResponseReasoningItem),
            f"first output item is {type(r.output[0]).__name__ if r.output else None}, "
            "expected reasoning",
        )
        thought = r.output[0]
        _expect(
            bool(thought.id) and thought.summary == [],
            f"reasoning item id={thought.id!r} summary={thought.summary}",
        )
        _expect(
            len(thought.content or []) == 1 and thought.content[0].type == "reasoning_text",
            f"reasoning content {thought.content}",
        )
        messages = [o for o in r.output[1:] if isinstance(o, ResponseOutputMessage)]
        _expect(
            len(r.output) == 1 + len(messages) and len(messages) <= 1,
            f"output items {[o.type for o in r.output]}",
        )
        n, used = r.usage.output_tokens_details.reasoning_tokens, r.usage.output_tokens
        _expect(1 <= n <= used, f"reasoning_tokens={n} output_tokens={used}")
        if messages:
            _expect(n < used, f"a message follows, yet reasoning_tokens={n} = output_tokens")
        return f"status={r.status} reasoning_tokens={n}/{used} items={[o.type for o in r.output]}"

    def stream_event_order(self, rid: str) -> str:
        extra = self.c.truncate_extra
        with self.c.client.responses.stream(
            model=self.c.model,
            input=PROMPT,
            reasoning={"effort": self.support.effort},
            max_output_tokens=self.max_tokens,
            store=False,
            extra_headers=self.c._headers(rid),
            **extra,
        ) as s:
            events = list(
                s
            )  # the helper asserts each event's output_index against what it accumulated
        types = [e.type for e in events]
        seq = [e.sequence_number for e in events]
        _expect(
            seq == list(range(seq[0], seq[0] + len(seq))),
            f"sequence numbers not consecutive: {seq}",
        )
        _expect(
            types[:2] == ["response.created", "response.in_progress"], f"first events {types[:2]}"
        )
        _expect(
            types[-1] in ("response.completed", "response.incomplete"), f"last event {types[-1]!r}"
        )
        items = [
            (e.type, e.output_index, e.item.type)
            for e in events
            if e.type.startswith("response.output_item.")
        ]
        _expect(
            items[:2]
            == [
                ("response.output_item.added", 0, "reasoning"),
                ("response.output_item.done", 0, "reasoning"),
            ],
            f"reasoning item events {items[:2]}",
        )
        first_msg = next(
            (i for i, t in enumerate(types) if t == "response.output_item.added" and i > 2),
            len(types),
        )
        order = [
            "response.output_item.added",
            "response.reasoning_text.delta",
            "response.reasoning_text.done",
            "response.output_item.done",
        ]
        pos = [types.index(t) for t in order if t in types[:first_msg]]
        _expect(
            len(pos) == len(order) and pos == sorted(pos),
            f"reasoning events out of order: {types[:first_msg]}",
        )
        for i, e in enumerate(events[2:-1], 2):
            want = 0 if i < first_msg else 1
            _expect(
                getattr(e, "output_index", want) == want,
                f"{e.type} has output_index {e.output_index}, expected {want}",
            )
        deltas = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
        done = next(e for e in events if e.type == "response.reasoning_text.done")
        final = events[-1].response
        _expect(
            deltas == done.text == _reasoning_text(final.output[0]),
            "reasoning deltas, done text and item differ",
        )
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        _expect(final.output_text == text, "final response text differs from the deltas")
        return (
            f"{len(events)} events, {types.count('response.reasoning_text.delta')} reasoning "
            f"deltas, message at {first_msg}"
        )

    def incomplete_inside_reasoning(self, rid: str) -> str:
        r = self._create(rid, CUT, effort="high")
        _expect(r.status == "incomplete", f"status={r.status!r}")
        _expect(
            getattr(r.incomplete_details, "reason", None) == "max_output_tokens",
            f"incomplete_details={r.incomplete_details}",
        )
        _expect(
            isinstance(r.output[0], ResponseReasoningItem) and r.output_text == "",
            f"items {[o.type for o in r.output]}, output_text={r.output_text!r}",
        )
        n, used = r.usage.output_tokens_details.reasoning_tokens, r.usage.output_tokens
        _expect(n == used == CUT, f"reasoning_tokens={n} output_tokens={used}, expected both {CUT}")
        return f"incomplete at {CUT} tokens, all reasoning"

    def stream_incomplete_inside_reasoning(self, rid: str) -> str:
        events = list(self._create(rid, CUT, effort="high", stream=True))
        types = [e.type for e in events]
        _expect(types[-1] == "response.incomplete", f"last event {types[-1]!r}")
        _expect(
            "response.reasoning_text.delta" in types and "response.output_text.delta" not in types,
            f"events {types}",
        )
        u = events[-1].response.usage
        _expect(
            u.output_tokens_details.reasoning_tokens == u.output_tokens == CUT,
            f"reasoning_tokens={u.output_tokens_details.reasoning_tokens} "
            f"output_tokens={u.output_tokens}",
        )
        return (
            "response.incomplete after "
            f"{types.count('response.reasoning_text.delta')} reasoning deltas"
        )

    def budget_respected(self, rid: str) -> str:
        budget = self.support.budget
        r = self._create(rid, self.max_tokens)
        n = r.usage.output_tokens_details.reasoning_tokens
        _expect(1 <= n <= budget, f"reasoning_tokens={n}, budget {budget}")
        if (
            self.c.truncate_extra
        ):  # ignore_eos: the output runs to max_output_tokens, past the budget
            _expect(
                any(isinstance(o, ResponseOutputMessage) for o in r.output),
                "no message after the budget",
            )
        return f"reasoning_tokens={n} <= budget {budget} ({self.support.effort})"

    def checks(self) -> list[tuple[str, Callable[[str], str]]]:
        out = [
            ("reasoning_non_stream_items", self.non_stream),
            ("reasoning_stream_event_order", self.stream_event_order),
            ("reasoning_incomplete_inside_reasoning", self.incomplete_inside_reasoning),
            (
                "reasoning_stream_incomplete_inside_reasoning",
                self.stream_incomplete_inside_reasoning,
            ),
        ]
        if self.support.budget is not None:
            out.append(("reasoning_budget_respected", self.budget_respected))
        effort = {"effort": self.support.effort}
        for name, overrides, param in (
            (
                "reject_reasoning_summary",
                {"reasoning": {**effort, "summary": "auto"}},
                "reasoning.summary",
            ),
            (
                "reject_include_encrypted_reasoning",
                {"reasoning": effort, "include": ["reasoning.encrypted_content"]},
                "include",
            ),
        ):
            out.append((name, lambda rid, o=overrides, p=param: self.c.rejection(rid, o, p)))
        return out
