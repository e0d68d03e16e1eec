"""Thinking mode in the engine loop, behind one object (engine.thinking holds the per-request
rules).  `ThinkSteps` keeps the sequences whose think block is not settled. At launch (`launch`) it
puts their forced closing tokens into the step's sampled tokens on the device and holds back a
sequence whose next sample must wait for the token just launched (the scheduler's `held`); at
read-back (`read`) it notes the block's close and the first answer token and releases held
sequences. Only sequences with thinking on are looked at, so the others cost nothing more per
token."""

from __future__ import annotations

import torch

from .sequence import Sequence
from .thinking import ThinkState, ThinkTokens
from .transfer import to_device


class ThinkSteps:
    def __init__(self, tokens: ThinkTokens | None, held: set[Sequence]):
        self.tokens = tokens  # the family's think block (None: no thinking mode)
        self.held = held  # the scheduler's: not scheduled until released here
        self.open: set[Sequence] = set()  # sequences whose think block is not settled

    def state(self, budget: int | None) -> ThinkState:
        """A new request's think state (ValueError for a family without thinking mode)."""
        if self.tokens is None:
            raise ValueError("this engine's family has no thinking mode")
        return ThinkState.of(self.tokens, budget)

    def add(self, seq: Sequence) -> None:
        if seq.think is not None:
            self.open.add(seq)

    def drop(self, seq: Sequence) -> None:
        """A sequence that ended: nothing more to force, hold or note."""
        if seq.think is not None:
            self.open.discard(seq)
            self.held.discard(seq)

    def launch(self, sampling: list[Sequence], toks: torch.Tensor) -> tuple[int, ...]:
        """Put the forced closing tokens into this step's tokens (on the device) and hold the
        sequences that must wait; the rows of the sampling sequences whose think block is not
        settled."""
        if not self.open:
            return ()
        rows, forced_rows, forced = [], [], []
        for row, s in enumerate(sampling):
            if s in self.open:
                rows.append(row)
                token = s.think.forced(s.sampled)
                if token is not None:
                    forced_rows.append(row)
                    forced.append(token)
        if forced:
            toks[to_device(forced_rows, toks.device)] = to_device(forced, toks.device, toks.dtype)
        return tuple(rows)

    def hold(self, sampling: list[Sequence], rows: tuple[int, ...]) -> None:
        """Hold the sequences whose next sample waits for the token just launched (engine.thinking);
        called once the launched tokens are appended as placeholders."""
        for row in rows:
            s = sampling[row]
            if s.think.must_wait(s.sampled):
                self.held.add(s)

    def read(self, seqs: list[Sequence], rows: tuple[int, ...], toks: list[int], now: int) -> None:
        """Note the think-block close and the first answer token of a step's thinking sequences."""
        for row in rows:
            s = seqs[row]
            if s.done:
                continue
            if self.held and s in self.held and s.think.waits_for(len(s.out)):
                self.held.discard(s)
            if s.think.read(len(s.out), toks[row]):
                s.timing.answer_first_token_ns = now
            if s.think.settled:
                self.open.discard(s)
