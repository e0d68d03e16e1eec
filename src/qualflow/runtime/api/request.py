"""A generation request and its sampling parameters, validated before the Task queues it."""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import InvalidRequest
from .grammar import GrammarSpec


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 256
    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 disables
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False  # benchmark extension: never stop on a stop token
    min_tokens: int = 0  # benchmark extension: stop tokens are suppressed before this many

    def validate(self) -> None:
        checks = [
            ("max_new_tokens", self.max_new_tokens >= 1, "must be >= 1"),
            ("temperature", 0.0 <= self.temperature <= 2.0, "must be in [0, 2]"),
            ("top_p", 0.0 < self.top_p <= 1.0, "must be in (0, 1]"),
            ("top_k", self.top_k >= 0, "must be >= 0"),
            (
                "min_tokens",
                0 <= self.min_tokens <= self.max_new_tokens,
                "must be in [0, max_new_tokens]",
            ),
        ]
        for name, ok, why in checks:
            if not ok:
                raise InvalidRequest(f"{name}={getattr(self, name)!r} {why}", param=name)


@dataclass(frozen=True)
class Thinking:
    """Thinking on (capability `reasoning`): the prompt was rendered with thinking on (it opens
    the think block), the output is reasoning up to the family's end-think token, then the
    answer. When `budget` output tokens would be reached with the block still open, the engine
    closes it by forcing the family's closing tokens, so reasoning never exceeds the budget.
    None: unbounded."""

    budget: int | None = None


@dataclass
class GenerationRequest:
    request_id: str
    prompt_token_ids: list[int]
    params: SamplingParams = field(default_factory=SamplingParams)
    thinking: Thinking | None = None  # None: thinking off
    grammar: GrammarSpec | None = None  # None: unconstrained (api/grammar.py)
