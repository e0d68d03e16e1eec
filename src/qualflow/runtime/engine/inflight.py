"""A launched engine step not read back yet (overlapped scheduling): what the loop keeps of it
between its launch and its read-back (engine.Engine._resolve)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .sequence import Sequence


@dataclass(frozen=True, slots=True)
class InFlight:
    """A launched step: its sampling sequences (row order) and their tokens, on the device (the next
    step's inputs read them there) and on the host once `ready` (None on CPU: already there)."""

    step: int
    seqs: list[Sequence]
    device_tokens: torch.Tensor
    host_tokens: torch.Tensor
    ready: torch.cuda.Event | None
    thinking: tuple[int, ...] = ()  # rows of sequences whose think block is not settled
