"""What a Task delivers per request: token events, then one final event carrying its timing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FinishReason = Literal["stop", "length", "cancelled", "error"]


@dataclass
class TokenEvent:
    """New tokens of one request; `text` is the newly decodable answer text (never a split
    character). With thinking on, `reasoning_text` is the new reasoning text and `reasoning` says
    whether the think block is still open after these tokens (the delimiters are in neither
    text)."""

    request_id: str
    token_ids: list[int]
    text: str
    reasoning_text: str = ""
    reasoning: bool = False


@dataclass
class TaskTiming:
    """Wall-clock epoch ns (time.time_ns()); derived durations in ns; and how many of the prompt's
    tokens the engine's prefix cache served."""

    submitted_ns: int
    first_scheduled_ns: int | None = None
    first_token_ns: int | None = None
    finished_ns: int | None = None
    answer_first_token_ns: int | None = None  # thinking on: the first token after the think block
    cached_tokens: int = 0  # prompt tokens served from the engine's prefix cache (not computed)

    @property
    def queue_wait_ns(self) -> int | None:
        return (
            None if self.first_scheduled_ns is None else self.first_scheduled_ns - self.submitted_ns
        )

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
        return {
            k: getattr(self, k)
            for k in (
                "submitted_ns",
                "first_scheduled_ns",
                "first_token_ns",
                "finished_ns",
                "queue_wait_ns",
                "prefill_ns",
                "decode_ns",
                "public_task_call_wall_ns",
                "answer_first_token_ns",
                "cached_tokens",
            )
        }


@dataclass
class FinalEvent:
    request_id: str
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    text: str  # the full generated text
    token_ids: list[int]
    timing: TaskTiming
    error: str | None = None
    tail_text: str = (
        ""  # text held back until the end (an incomplete character); not yet in any TokenEvent
    )
    # thinking on: the reasoning (None when off), its token count (the end-think token included; the
    # answer is the rest of completion_tokens), its held-back tail, and whether the think block
    # closed
    reasoning_text: str | None = None
    reasoning_tokens: int = 0
    reasoning_tail: str = ""
    reasoning_closed: bool = False
