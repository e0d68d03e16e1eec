"""A request's stream as batches of events, closable before it is read (the handler's
`stream_batches`)."""

from __future__ import annotations

from collections.abc import AsyncIterator


class BatchStream:
    """A request's event batches (ResponsesHandler.stream_batches): an async iterator whose
    `aclose()` also ends the Task request when the batches were never read (an async generator
    that never started runs no `finally`)."""

    def __init__(self, batches: AsyncIterator[list], close):
        self._batches, self._close = batches, close

    def __aiter__(self) -> BatchStream:
        return self

    async def __anext__(self) -> list:
        return await self._batches.__anext__()

    async def aclose(self) -> None:
        await self._batches.aclose()
        await self._close()
