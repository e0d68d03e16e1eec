"""The public Task API: what the server (and benchmarks, correctness) call. Never the model directly.

A Task is loaded from a bundle, declares capabilities, validates requests before queueing them and
serves many concurrent requests through one engine loop running on its own thread.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

TEXT_GENERATION = "text-generation"
STREAMING = "streaming"
FinishReason = Literal["stop", "length", "cancelled", "error"]


class TaskError(Exception):
    """Base of every error the Task raises."""


class CapabilityMissing(TaskError):
    def __init__(self, capability: str, have: frozenset[str]):
        super().__init__(f"task lacks capability {capability!r}; it has {sorted(have)}")
        self.capability = capability


class InvalidRequest(TaskError):
    """A request that cannot be queued. `param` names the offending field."""

    def __init__(self, message: str, param: str | None = None, code: str = "invalid_value"):
        super().__init__(message)
        self.param = param
        self.code = code


class PromptTooLong(InvalidRequest):
    def __init__(self, n_prompt: int, max_new: int, limit: int):
        super().__init__(
            f"prompt of {n_prompt} tokens plus max_new_tokens={max_new} exceeds the context limit of {limit}",
            param="input", code="context_length_exceeded")
        self.n_prompt, self.limit = n_prompt, limit


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 256
    temperature: float = 1.0      # 0 means greedy
    top_p: float = 1.0
    top_k: int = 0                # 0 disables
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False      # benchmark extension: never stop on a stop token
    min_tokens: int = 0           # benchmark extension: stop tokens are suppressed before this many

    def validate(self) -> None:
        checks = [
            ("max_new_tokens", self.max_new_tokens >= 1, "must be >= 1"),
            ("temperature", 0.0 <= self.temperature <= 2.0, "must be in [0, 2]"),
            ("top_p", 0.0 < self.top_p <= 1.0, "must be in (0, 1]"),
            ("top_k", self.top_k >= 0, "must be >= 0"),
            ("min_tokens", 0 <= self.min_tokens <= self.max_new_tokens, "must be in [0, max_new_tokens]"),
        ]
        for name, ok, why in checks:
            if not ok:
                raise InvalidRequest(f"{name}={getattr(self, name)!r} {why}", param=name)


@dataclass
class GenerationRequest:
    request_id: str
    prompt_token_ids: list[int]
    params: SamplingParams = field(default_factory=SamplingParams)


@dataclass
class TokenEvent:
    """New tokens of one request; `text` is the newly decodable text (never a split character)."""
    request_id: str
    token_ids: list[int]
    text: str


@dataclass
class TaskTiming:
    """Wall-clock epoch ns (time.time_ns()); derived durations in ns."""
    submitted_ns: int
    first_scheduled_ns: int | None = None
    first_token_ns: int | None = None
    finished_ns: int | None = None

    @property
    def queue_wait_ns(self) -> int | None:
        return None if self.first_scheduled_ns is None else self.first_scheduled_ns - self.submitted_ns

    @property
    def prefill_ns(self) -> int | None:
        if self.first_scheduled_ns is None or self.first_token_ns is None:
            return None
        return self.first_token_ns - self.first_scheduled_ns

    @property
    def decode_ns(self) -> int | None:
        if self.first_token_ns is None or self.finished_ns is None:
            return None
        return self.finished_ns - self.first_token_ns

    @property
    def public_task_call_wall_ns(self) -> int | None:
        return None if self.finished_ns is None else self.finished_ns - self.submitted_ns

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in (
            "submitted_ns", "first_scheduled_ns", "first_token_ns", "finished_ns", "queue_wait_ns",
            "prefill_ns", "decode_ns", "public_task_call_wall_ns")}


@dataclass
class FinalEvent:
    request_id: str
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    text: str                     # the full generated text
    token_ids: list[int]
    timing: TaskTiming
    error: str | None = None
    tail_text: str = ""           # text held back until the end (an incomplete character); not yet in any TokenEvent
