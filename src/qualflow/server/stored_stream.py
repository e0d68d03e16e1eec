"""The event stream of a stateful request: every response snapshot it sends echoes the turn
(store, previous_response_id, truncation), and the response is stored before its terminal event
goes out, so that a client that saw `response.completed` can retrieve it (after a crash too). A
write that fails turns the terminal event into `response.failed`, preceded by an error event."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from .message_tail import MessageTail
from .protocol.errors import ApiError
from .protocol.events import ErrorEvent, ResponseEvent
from .stateful import Turn, write
from .timing import TimingRecord

TERMINAL = ("response.completed", "response.incomplete", "response.failed")


class StoredStream:
    """The handler's event batches (a BatchStream), echoed and stored; `gone()`: the client left
    (nothing is stored then)."""

    def __init__(self, batches, turn: Turn, rec: TimingRecord, gone: Callable[[], bool]) -> None:
        self._batches, self.turn, self.rec, self.gone = batches, turn, rec, gone
        self.echo = turn.echo()

    def __aiter__(self) -> AsyncIterator[list]:
        return self

    async def __anext__(self) -> list:
        batch = await self._batches.__anext__()
        if batch and isinstance(batch[-1], MessageTail):  # the tail's own models: stored, echoed
            batch[-1:] = batch[-1].events()
        for i, e in enumerate(batch):
            if not isinstance(e, ResponseEvent):
                continue
            if e.type not in TERMINAL:
                e.response = e.response.model_copy(update=self.echo)
            elif self.gone():
                e.response = e.response.model_copy(update={**self.echo, "store": False})
            else:
                batch[i:] = await self._terminal(e)
                break
        return batch

    async def _terminal(self, e: ResponseEvent) -> list:
        try:
            e.response = await write(self.turn, e.response, self.rec)
            return [e]
        except ApiError as err:
            failed = e.response.model_copy(
                update={
                    **self.echo,
                    "store": False,
                    "status": "failed",
                    "error": {"code": "server_error", "message": err.message},
                }
            )
            error = ErrorEvent(
                code=err.code, message=err.message, error={"code": err.code, "message": err.message}
            )
            error.sequence_number = e.sequence_number
            done = ResponseEvent(
                type="response.failed", sequence_number=e.sequence_number + 1, response=failed
            )
            return [error, done]

    async def aclose(self) -> None:
        await self._batches.aclose()
