"""A message stream's tail (server/message_tail.py): the JSON cut from the templates made at the
head is byte for byte the JSON of the models it stands for, whatever the request echoes and the
answer holds; a request that echoes a marker, a failed response and text the models cannot encode
take the models' own path."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from fixtures.fake_task import FakeTask, final
from qualflow.server.handler import ResponsesHandler
from qualflow.server.message_tail import TEXT, MessageTail, TailTemplates
from qualflow.server.protocol.requests import parse_request
from qualflow.server.protocol.responses import Response
from qualflow.server.tools import echo

BODY = {"model": "fake", "input": "abc", "max_output_tokens": 4, "stream": True}
TEXTS = ["", "ab", 'say "hi"\\ back\n\ttab \x00\x1f\x7f', "héllo 日本 😀 \u2028", "x" * 5000]


def _tail(body: dict, reason: str, text: str, seq: int = 7, **final_fields) -> MessageTail:
    core = ResponsesHandler(FakeTask([]))
    p = core.prepare(parse_request(BODY), "rid")  # the sampling parameters and ids
    req = parse_request(body)  # what the response echoes (beyond what the fake family takes)
    snapshot = echo(
        Response.from_request(req, p.gen.params, p.response_id, p.created_at, core.model_name),
        req,
    )
    f = dataclasses.replace(final(reason, text), **final_fields)
    templates = TailTemplates(snapshot, p.message_id, "length" if reason == "length" else "stop")
    return MessageTail(snapshot, f, p.message_id, text, templates, seq)


def _models(tail: MessageTail) -> list[tuple[str, bytes]]:
    return [(e.type, e.__pydantic_serializer__.to_json(e)) for e in tail.events()]


@pytest.fixture
def frozen_clock(monkeypatch):
    monkeypatch.setattr(time, "time", lambda: 1_765_000_000.25)


@pytest.mark.parametrize("reason", ["stop", "length"])
@pytest.mark.parametrize("text", TEXTS)
def test_the_templates_give_the_models_bytes(frozen_clock, reason, text):
    body = {
        **BODY,
        "instructions": 'be "brief"\n',
        "metadata": {"k": "v ü"},
        "temperature": 0.5,
        "top_p": 0.9,
        "user": "u1",
    }
    tail = _tail(body, reason, text, prompt_tokens=123, completion_tokens=45)
    tail.final.timing.cached_tokens = 64
    got = tail.templates.render(tail)
    assert got is not None  # cut from the templates, not the models' fallback
    assert got == _models(tail)
    assert [t for t, _ in got][-1] == (
        "response.completed" if reason == "stop" else "response.incomplete"
    )
    assert tail.count == len(got) == 4
    assert tail.rendered() == got


@pytest.mark.parametrize(
    "echoed",
    [{"instructions": TEXT}, {"metadata": {"n": "x:4600000000000000030"}}],
)
def test_a_request_that_echoes_a_marker_gets_the_models(frozen_clock, echoed):
    tail = _tail({**BODY, **echoed}, "stop", "ab")
    assert tail.templates.cut is None
    assert tail.templates.render(tail) is None
    assert tail.rendered() == _models(tail)


def test_a_marker_inside_a_longer_string_is_not_a_slot(frozen_clock):
    tail = _tail({**BODY, "instructions": f"quote {TEXT}"}, "stop", "ab")
    assert tail.templates.render(tail) == _models(tail)


def test_a_reason_the_request_did_not_expect_gets_the_models(frozen_clock):
    tail = _tail(BODY, "stop", "ab")
    short = dataclasses.replace(tail, final=dataclasses.replace(tail.final, finish_reason="length"))
    assert tail.templates.reason == "stop" and tail.templates.cut is not None
    assert tail.templates.render(short) is None
    assert short.rendered() == _models(short)


def test_a_failed_response_renders_its_error_event_from_the_models(frozen_clock):
    tail = _tail(BODY, "error", "a")
    assert tail.templates.render(tail) is None
    got = tail.rendered()
    assert [t for t, _ in got] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "error",
        "response.failed",
    ]
    assert tail.count == 5 and got == _models(tail)
    assert b'"sequence_number":11' in got[-1][1]


def test_text_json_cannot_hold_is_left_to_the_models():
    tail = _tail(BODY, "stop", "bad \ud800")
    assert tail.templates.render(tail) is None
    with pytest.raises(Exception, match="surrogates"):
        tail.rendered()


def test_a_stream_ends_in_its_tail_cut_from_templates_made_after_its_first_delta(frozen_clock):
    from qualflow.runtime import TokenEvent
    from qualflow.server.http.sse import sse_frame

    async def batches(events, body=BODY):
        core = ResponsesHandler(FakeTask(events))
        p = core.prepare(parse_request(body), "rid")
        return [b async for b in core.stream_batches(p)]

    out = asyncio.run(
        batches([TokenEvent("x", [5], "a"), TokenEvent("x", [6], "b"), final("stop")])
    )
    tail = out[-1][-1]
    assert isinstance(tail, MessageTail) and tail.templates.reason == "stop"
    assert tail.templates.cut is not None
    assert tail.sequence_number == 4 + 2  # after the head's four events and two deltas
    assert sse_frame(tail) == b"".join(sse_frame(e) for e in tail.events())
    assert tail.templates.render(tail) is not None
    # a request that ignores its stop tokens expects to be cut at its max_output_tokens
    ignoring = {**BODY, "ignore_eos": True}
    out = asyncio.run(batches([TokenEvent("x", [5], "a"), final("length")], ignoring))
    assert out[-1][-1].templates.reason == "length" and out[-1][-1].templates.cut is not None
    # no delta before the final: no templates, the models
    (only,) = asyncio.run(batches([final("stop", "")]))[1:]
    assert only[-1].templates is None and only[-1].rendered() == _models(only[-1])
