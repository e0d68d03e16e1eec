"""Server-sent events of the handler's event batches, and the disconnect watch that cancels a
request whose client left."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

from starlette.responses import Response

from ..message_tail import MessageTail
from ..protocol.events import ResponseEvent
from .sse import sse_frame


def _is_last(batch: list) -> bool:
    e = batch[-1]
    if isinstance(e, MessageTail):
        return True
    return isinstance(e, ResponseEvent) and e.type not in (
        "response.created",
        "response.in_progress",
    )


def watch_disconnect(receive, on_gone: Callable[[], None]) -> asyncio.Task:
    """A task that calls `on_gone` once the client disconnects (cancel it when the answer is
    out)."""

    async def watch():
        while (await receive())["type"] != "http.disconnect":
            pass
        on_gone()

    return asyncio.ensure_future(watch())


class EventStream(Response):
    """SSE of the handler's event batches: each batch (one engine step's delta, or the head /
    tail) is one write. A client that leaves cancels the Task request; the stream is still
    drained to the Task's final event (which comes at once), so the record gets the Task's own
    outcome and timing. `on_done` gets the time the last write was handed to the transport (None
    where none was): the stream's closing work after it is not the request's HTTP time."""

    HEADERS = [
        (b"content-type", b"text/event-stream; charset=utf-8"),
        (b"cache-control", b"no-cache"),
        (b"x-accel-buffering", b"no"),
    ]

    def __init__(
        self,
        batches: AsyncIterator[list],
        on_gone: Callable[[], None],
        on_done: Callable[[int | None], None],
    ):
        self.status_code, self.background = 200, None
        self.raw_headers = list(self.HEADERS)
        self.batches, self.on_gone, self.on_done = batches, on_gone, on_done

    async def __call__(self, scope, receive, send):
        gone, sent_ns = False, None

        def left():
            nonlocal gone
            gone = True
            self.on_gone()

        watcher = watch_disconnect(receive, left)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for batch in self.batches:
                if not gone:
                    last = _is_last(batch)
                    await send(
                        {
                            "type": "http.response.body",
                            "body": b"".join(map(sse_frame, batch)),
                            "more_body": not last,
                        }
                    )
                    if last:
                        sent_ns = time.time_ns()
        finally:
            watcher.cancel()
            await self.batches.aclose()
            self.on_done(sent_ns)
