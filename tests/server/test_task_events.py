"""A request's Task events (server/task_events.py): the final leaves `inflight` as it comes (a
client that leaves then cancels nothing) and is recorded once, when the events are closed (after a
stream's last write), not before the consumer gets it."""

from __future__ import annotations

import asyncio

from fixtures.fake_task import FakeTask, final
from qualflow.runtime import TokenEvent
from qualflow.server.handler import ResponsesHandler
from qualflow.server.protocol.requests import parse_request
from qualflow.server.task_events import RequestEvents

BODY = {"model": "fake", "input": "abc", "max_output_tokens": 4, "stream": True}


def test_the_final_is_recorded_once_when_the_events_close():
    task = FakeTask([TokenEvent("x", [5], "a"), final("stop", "a")])
    core = ResponsesHandler(task)
    p = core.prepare(parse_request(BODY), "rid")
    recorded = []

    async def go():
        events = RequestEvents(task, p, core.inflight, lambda p, f: recorded.append(f))
        assert p.response_id in core.inflight
        got = [ev async for ev in events]
        assert got[-1].finish_reason == "stop"
        assert recorded == [] and p.response_id not in core.inflight  # not yet: still sending
        core.abandon(p.response_id)  # the client leaves after the final: nothing to cancel
        assert task.cancelled == [] and not p.abandoned
        await events.aclose()
        await events.aclose()
        return got

    got = asyncio.run(go())
    assert recorded == [got[-1]]  # once


def test_a_stream_records_its_outcome_before_the_server_logs_it():
    task = FakeTask([TokenEvent("x", [5], "a"), final("length", "a")])
    core = ResponsesHandler(task)
    p = core.prepare(parse_request(BODY), "rid")

    async def go():
        batches = core.stream_batches(p)
        async for _ in batches:
            assert p.record.status == "in_progress"
        await batches.aclose()

    asyncio.run(go())
    assert p.record.status == "incomplete" and p.record.output_tokens == 2
