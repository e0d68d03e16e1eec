"""One prepared request's Task events, as the handler consumes them: submitted to the Task when
made (a stream's head is built and sent while the engine prefills), the last event always a
FinalEvent (a Task that cannot serve, or fails, gives an error final, never a cut stream),
recorded when the events are closed: a stream's closing comes after its last write, which its
record's bookkeeping no longer holds back."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from qualflow.runtime import FinalEvent, TaskTiming


class RequestEvents:
    """Async iterator over the Task's events of `p` (a handler.Prepared). Until its final, `p` is
    in `inflight` (so that `abandon` can cancel it); `aclose()` (idempotent; every consumer calls
    it) removes it, cancels a request the engine is still on, whether or not it was ever iterated,
    and records the final (`record(p, final)`) once."""

    def __init__(
        self, task: Any, p: Any, inflight: dict, record: Callable[[Any, FinalEvent], None]
    ):
        self.p, self.inflight, self.record = p, inflight, record
        inflight[p.response_id] = p
        self.stream, self.failure, self.done = None, None, False
        self.final: FinalEvent | None = None  # come, not yet recorded
        try:
            self.stream = task.open(p.gen)
        except Exception as e:  # noqa: BLE001 - reported as the request's error final
            self.failure = f"{type(e).__name__}: {e}"

    def __aiter__(self) -> RequestEvents:
        return self

    async def __anext__(self):
        if self.done:
            raise StopAsyncIteration
        ev = None
        if self.failure is None:
            try:
                ev = await self.stream.__anext__()
            except StopAsyncIteration:
                self.failure = "the Task ended without a final event"
            except Exception as e:  # noqa: BLE001 - reported as the request's error, never a cut stream
                self.failure = f"{type(e).__name__}: {e}"
        if ev is not None and not isinstance(ev, FinalEvent):
            return ev
        final = ev or FinalEvent(
            self.p.gen.request_id,
            "error",
            len(self.p.gen.prompt_token_ids),
            0,
            "",
            [],
            TaskTiming(self.p.record.http_received_ns, finished_ns=time.time_ns()),
            self.failure,
        )
        self.done, self.final = True, final
        self.inflight.pop(
            self.p.response_id, None
        )  # done: a client that leaves now cancels nothing
        return final

    def pending(self) -> bool:
        """Whether the next event comes without waiting (a failure's final always does)."""
        return not self.done and (self.failure is not None or self.stream.pending())

    async def aclose(self) -> None:
        self.inflight.pop(self.p.response_id, None)
        if self.stream is not None:
            await self.stream.aclose()
        if self.final is not None:  # recorded once, after the stream's last write
            final, self.final = self.final, None
            self.record(self.p, final)
