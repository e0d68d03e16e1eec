"""What a Task delivers per request: token events, then one final event carrying its timing."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FinishReason = Literal["stop", "length", "cancelled", "error"]


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
