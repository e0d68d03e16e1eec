"""The SSE response of an event stream (server/http/streaming.py): the request's HTTP time ends
when its last write goes to the transport, not after the stream's closing work."""

from __future__ import annotations

import asyncio
import time

from qualflow.server.http.streaming import EventStream
from qualflow.server.protocol.events import ResponseEvent
from qualflow.server.protocol.responses import Response


class Batches:
    """One batch holding the terminal event; closing takes `close_s`."""

    def __init__(self, close_s: float):
        resp = Response(
            id="resp_1", created_at=0, model="m", temperature=1.0, top_p=1.0, status="completed"
        )
        self.left = [[ResponseEvent(type="response.completed", response=resp)]]
        self.close_s = close_s

    def __aiter__(self):
        return self

    async def __anext__(self):
        if not self.left:
            raise StopAsyncIteration
        return self.left.pop()

    async def aclose(self):
        await asyncio.sleep(self.close_s)


def test_the_end_of_the_http_time_is_the_last_write_not_the_close():
    sent, done = [], []

    async def receive():
        await asyncio.sleep(10)
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.body" and not message["more_body"]:
            sent.append((message["body"], time.time_ns()))

    stream = EventStream(Batches(close_s=0.05), lambda: None, lambda ns: done.append(ns))
    asyncio.run(stream({"type": "http"}, receive, send))
    ((body, written_ns),), (sent_ns,) = sent, done
    assert body.startswith(b"event: response.completed\ndata: ")
    assert sent_ns is not None and written_ns <= sent_ns < written_ns + 20_000_000  # not 50 ms on


def test_a_stream_that_wrote_nothing_reports_no_write_time():
    done = []

    class Empty(Batches):
        def __init__(self):
            super().__init__(0)
            self.left = []

    async def receive():
        await asyncio.sleep(10)
        return {"type": "http.disconnect"}

    async def send(message):
        pass

    asyncio.run(EventStream(Empty(), lambda: None, done.append)({"type": "http"}, receive, send))
    assert done == [None]
