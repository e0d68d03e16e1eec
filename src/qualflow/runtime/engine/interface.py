"""What a Task needs of an engine, wherever it runs: `EngineClient` is implemented by the
in-process `engine.Engine` and by `process.core.EngineProxy`; `submit` hands back a
`SequenceView`, what the caller side reads of a request while it runs (engine.sequence.Sequence,
or a `SubmittedRequest` where the engine keeps its own state elsewhere: the proxy, the synthetic
engine)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..api.events import TaskTiming
from ..api.request import GenerationRequest
from .outputs import Sink

if TYPE_CHECKING:
    import torch


class SequenceView(Protocol):
    """A submitted request as its caller reads it: the output ids are complete, and the timing
    stamped, by the time its Final reaches the sink."""

    req: GenerationRequest
    out: list[int]
    timing: TaskTiming
    done: bool


@dataclass(eq=False)
class SubmittedRequest:
    """A SequenceView that only records what the caller reads (output ids, timing, done), for an
    engine whose own state lives elsewhere: the engine process's proxy, the synthetic engine."""

    req: GenerationRequest
    sink: Sink
    timing: TaskTiming
    out: list[int] = field(default_factory=list)
    done: bool = False


class EngineClient(Protocol):
    def submit(self, req: GenerationRequest, sink: Sink) -> SequenceView:
        """Queue a request; its items go to `sink` (see engine.outputs)."""

    def cancel(self, request_id: str) -> None:
        """End the request of that id as `cancelled` (nothing happens if it has ended)."""

    def score(self, token_ids: list[int]) -> torch.Tensor:
        """Teacher-forced logits [T, V] (float32, on CPU) for one sequence; nothing is cached."""

    def health(self) -> str | None:
        """None while the engine serves; otherwise why it cannot."""

    def close(self) -> None:
        """Stop: open requests end as cancelled."""
