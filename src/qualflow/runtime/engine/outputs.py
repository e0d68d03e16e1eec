"""What an engine delivers to a request's sink: `Tokens` as they are sampled, then exactly one
`Final`. The sink is called on the engine's thread, so it must be cheap and thread-safe."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..api.events import FinishReason


@dataclass(frozen=True, slots=True)
class Tokens:
    """Token ids sampled for one request (one per engine step in this process; a step's worth when
    they crossed a process boundary)."""

    ids: list[int]


@dataclass(frozen=True, slots=True)
class Final:
    """The request ended: why, and for an `error` what went wrong."""

    reason: FinishReason
    error: str | None = None


EngineItem = Tokens | Final
Sink = Callable[[EngineItem], None]
