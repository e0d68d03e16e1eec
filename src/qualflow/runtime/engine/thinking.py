"""The think block of a request with thinking on, inside the engine: where its budget forces the
close, whether the block closed, and when the answer began.

The prompt opens the block (the family renders it so), so output tokens are reasoning until the
family's end-think token. With a budget B the engine forces the family's closing tokens C (which
hold the end-think token) from the output position that puts the end-think token at position B - 1,
unless the model closed the block before: the reasoning (the end-think token included) is then
exactly B tokens, or fewer when the model closed it itself; what C holds after the end-think token
(Qwen3's blank line) starts the answer, and the model goes on from there.

Only requests with thinking carry a ThinkState, and the engine only looks at those (a set kept
beside the scheduler), so a request without thinking costs nothing per token. The one ordering
subtlety is overlapped scheduling: the forcing decision at position B - len(C) needs the token
before it, so a sequence whose next sample is that position waits (one step) until that token is
read back."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ThinkTokens:
    """The family's think-block tokens the engine needs."""

    end_id: int
    close_ids: tuple[int, ...]


@dataclass(slots=True, eq=False)
class ThinkState:
    tokens: ThinkTokens
    force_from: int | None  # output position where the forced close starts; None: unbounded
    closed_at: int | None = None  # output position of the end-think token, once read back
    forcing: bool = False  # the close is being forced
    answer_started: bool = False  # a token after the block has been read back

    @classmethod
    def of(cls, tokens: ThinkTokens, budget: int | None) -> ThinkState:
        return cls(
            tokens,
            None if budget is None else max(0, budget - tokens.close_ids.index(tokens.end_id) - 1),
        )

    def forced(self, position: int) -> int | None:
        """The token forced at output `position` (the one being sampled now), or None."""
        if self.force_from is None:
            return None
        k = position - self.force_from
        if k == 0 and self.closed_at is None:
            self.forcing = True
        if self.forcing and 0 <= k < len(self.tokens.close_ids):
            return self.tokens.close_ids[k]
        return None

    def must_wait(self, next_position: int) -> bool:
        """The next sample decides whether to force, and the token before it is not read back
        yet."""
        return next_position == self.force_from and self.closed_at is None and not self.forcing

    def waits_for(self, position: int) -> bool:
        """Output token `position` is the one the forcing decision waits for (see must_wait)."""
        return self.force_from is not None and position == self.force_from - 1

    def read(self, position: int, token: int) -> bool:
        """Output token `position` was read back; True when it is the first answer token."""
        if self.closed_at is None:
            if token == self.tokens.end_id:
                self.closed_at = position
            return False
        if not self.answer_started and position > self.closed_at:
            self.answer_started = True
            return True
        return False

    @property
    def settled(self) -> bool:
        """Nothing more to decide or stamp."""
        return self.answer_started
