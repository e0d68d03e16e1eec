"""Protocol models and the typed core without HTTP (cheap: no model loaded)."""

from __future__ import annotations

import asyncio

import pytest

from fixtures.fake_task import FakeTask, final
from qualflow.runtime import TokenEvent
from qualflow.server.handler import ResponsesHandler as Core
from qualflow.server.message_tail import MessageTail
from qualflow.server.protocol.errors import ApiError
from qualflow.server.protocol.input_items import input_messages
from qualflow.server.protocol.requests import parse_request
from qualflow.server.protocol.responses import new_id
from qualflow.server.supported import check_supported
from qualflow.server.timing import TimingStore, new_record


def err(fn, *a) -> ApiError:
    with pytest.raises(ApiError) as e:
        fn(*a)
    return e.value


def test_parse_request_errors_are_openai_shaped():
    e = err(parse_request, b'{"model": "m", "input": "x", "bogus": 1}')
    assert (e.status, e.code, e.param) == (400, "unknown_parameter", "bogus")
    assert e.body() == {
        "error": {
            "message": "Unknown parameter: 'bogus'.",
            "type": "invalid_request_error",
            "param": "bogus",
            "code": "unknown_parameter",
        }
    }
    assert err(parse_request, b"{oops").code == "invalid_json"
    assert err(parse_request, b'"a string"').code == "invalid_json"
    assert err(parse_request, {"temperature": "0.5"}).code == "invalid_type"  # strict: no coercion
    assert err(parse_request, {"stream": 1}).code == "invalid_type"
    e = err(parse_request, {"max_output_tokens": 0})
    assert (e.code, e.param) == ("integer_below_min_value", "max_output_tokens")
    assert parse_request({"temperature": 1}).temperature == 1.0  # an int is a valid number


def test_input_messages():
    assert input_messages("hi") == [{"role": "user", "content": "hi"}]
    items = [
        {"role": "system", "content": "S"},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}],
        },
        {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "c", "annotations": [], "logprobs": []}],
        },
        {"role": "developer", "content": "D"},
    ]
    assert input_messages(items) == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "ab"},
        {"role": "assistant", "content": "c"},
        {"role": "developer", "content": "D"},
    ]
    e = err(input_messages, [{"role": "user", "content": [{"type": "output_text", "text": "x"}]}])
    assert (e.code, e.param) == ("unsupported_value", "input[0].content[0].type")
    e = err(input_messages, [{"role": "user", "content": [{"type": "input_text"}]}])
    assert (e.code, e.param) == ("invalid_type", "input[0].content[0].text")
    e = err(input_messages, [{"role": "user"}])
    assert (e.code, e.param) == ("missing_required_parameter", "input[0].content")


def test_check_supported_accepts_defaults():
    check_supported(
        parse_request(
            {
                "model": "m",
                "input": "x",
                "tools": [],
                "tool_choice": "none",
                "include": [],
                "reasoning": {},
                "top_logprobs": 0,
                "truncation": "disabled",
                "text": {"format": {"type": "text"}},
                "background": False,
            }
        )
    )


def test_ids_and_timing_store(tmp_path):
    assert new_id("resp").startswith("resp_") and len(new_id("resp")) == 5 + 50
    store = TimingStore(max_records=2, log_path=tmp_path / "t.jsonl")
    recs = [
        store.add(new_record(f"r{i}", f"resp_{i}", "warmup" if i else None, True, 100 + i))
        for i in range(3)
    ]
    assert [r["request_id"] for r in store.query()] == ["r1", "r2"]  # bounded: oldest dropped
    assert [r["request_id"] for r in store.query(tag="warmup", since_ns=102)] == ["r2"]
    assert [r["request_id"] for r in store.query({"r1", "zz"})] == ["r1"]
    store.finish(recs[2], 999)
    store.close()
    assert '"http_sent_ns": 999' in (tmp_path / "t.jsonl").read_text()


def run_stream(core, body):
    async def go():
        return [e async for e in core.stream_response(parse_request(body), "rid")]

    return asyncio.run(go())


BODY = {"model": "fake", "input": "abc", "max_output_tokens": 4}


def test_core_rejects_before_anything_is_queued():
    core = Core(FakeTask([]))
    assert (
        err(core.prepare, parse_request({**BODY, "model": "other"}), "r").code == "model_not_found"
    )
    e = err(core.prepare, parse_request({**BODY, "instructions": "x"}), "r")
    assert (e.code, e.param) == (
        "unsupported_parameter",
        "instructions",
    ) and "fake family" in e.message
    e = err(core.prepare, parse_request({**BODY, "max_output_tokens": 62}), "r")
    assert (e.code, e.param) == ("context_length_exceeded", "input")
    e = err(core.prepare, parse_request({**BODY, "min_tokens": 5}), "r")
    assert (e.code, e.param) == ("invalid_value", "min_tokens")


def test_core_stream_error_ends_with_error_then_failed():
    events = run_stream(Core(FakeTask([TokenEvent("x", [5], "a"), final("error", "a")])), BODY)
    types = [e.type for e in events]
    assert (
        types[-2:] == ["error", "response.failed"]
        and types.count("response.output_text.delta") == 1
    )
    assert (
        events[-2].error["code"] == "server_error"
        and events[-1].response.error["message"] == "boom"
    )
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_core_stream_flushes_tail_text():
    events = run_stream(
        Core(FakeTask([TokenEvent("x", [5], "a"), final("stop", "ab", tail="b")])), BODY
    )
    assert [e.delta for e in events if e.type == "response.output_text.delta"] == ["a", "b"]
    assert (
        events[-1].type == "response.completed"
        and events[-1].response.output[0].content[0].text == "ab"
    )


def test_core_early_close_cancels_the_task_request():
    task = FakeTask([TokenEvent("x", [5], "a")] * 50 + [final("length")])
    core = Core(task)

    async def go():
        stream = core.stream_response(parse_request(BODY), "rid")
        async for e in stream:
            if e.type == "response.output_text.delta":
                break
        await stream.aclose()

    asyncio.run(go())
    assert len(task.cancelled) == 1 and task.cancelled[0].startswith("resp_")


def test_core_submits_when_the_stream_is_made_and_a_stream_closed_at_its_head_cancels():
    """The engine gets the request when the stream is made, before the HTTP layer builds or sends
    anything, so it prefills meanwhile; a stream closed right after its head still cancels that
    request and leaves nothing in flight."""
    opened = []

    class Recording(FakeTask):
        def open(self, req):
            opened.append(req.request_id)
            return super().open(req)

    task = Recording([TokenEvent("x", [5], "a")] * 5 + [final("length")])
    core = Core(task)

    async def go():
        p = core.prepare(parse_request({**BODY, "stream": True}), "rid")
        batches = core.stream_batches(p)
        assert opened == [p.gen.request_id]  # submitted before the first batch is asked for
        head = await batches.__anext__()
        assert head[0].type == "response.created"
        await batches.aclose()
        return p

    p = asyncio.run(go())
    assert (
        task.cancelled == [p.gen.request_id]
        and core.inflight == {}
        and p.record.status == "cancelled"
    )


def test_a_stream_closed_before_it_is_read_cancels_its_submitted_request():
    """A stream the HTTP layer never reads (the client left before the response started) still ends
    the request it submitted: cancelled, recorded, nothing in flight."""
    task = FakeTask([TokenEvent("x", [5], "a")] * 5 + [final("length")])
    core = Core(task)

    async def go():
        p = core.prepare(parse_request({**BODY, "stream": True}), "rid")
        await core.stream_batches(p).aclose()
        return p

    p = asyncio.run(go())
    assert (
        task.cancelled == [p.gen.request_id]
        and core.inflight == {}
        and p.record.status == "cancelled"
    )


def test_core_non_stream_failure_is_500():
    core = Core(FakeTask([final("error")]))
    with pytest.raises(ApiError) as e:
        asyncio.run(core.create_response(parse_request(BODY), "rid-9"))
    assert e.value.status == 500 and e.value.code == "server_error" and "boom" in e.value.message


def test_server_reaches_the_model_only_through_the_task_api():
    import ast
    import pathlib

    import qualflow.server

    for f in pathlib.Path(qualflow.server.__file__).parent.rglob("*.py"):  # server/http/ included
        for n in ast.walk(ast.parse(f.read_text())):
            if (
                isinstance(n, ast.ImportFrom)
                and n.level == 0
                and (n.module or "").startswith("qualflow")
            ):
                # + the leaf modules: the phase vocabulary, the config helpers and the process
                # lifetime rules (they import nothing from qualflow)
                assert n.module in (
                    "qualflow.runtime",
                    "qualflow.phases",
                    "qualflow.configs",
                    "qualflow.lifetime",
                ), (f.name, n.module)
            if isinstance(n, ast.Import):
                assert not any(a.name.startswith("qualflow") for a in n.names), f.name


@pytest.mark.parametrize("reason", ["stop", "length", "error"])
def test_objects_validate_strictly_against_the_published_types(reason):
    """completed / incomplete / failed: every stream event as rendered on the wire, and the
    non-stream Response (or its 500 error body), under the openai SDK's and the Open Responses
    types."""
    import json

    from fixtures.published_schemas import (
        assert_valid,
        error_body_problems,
        event_problems,
        response_problems,
    )
    from qualflow.server.http.sse import sse_frame

    def task():
        return FakeTask([TokenEvent("x", [5], "a"), final(reason, "ab", tail="b")])

    events = run_stream(Core(task()), {**BODY, "stream": True})
    for e in events:
        data = json.loads(sse_frame(e).split(b"data: ", 1)[1])
        assert_valid(event_problems(data), f"{reason}: event {data['type']}")
    assert (
        events[-1].type
        == {
            "stop": "response.completed",
            "length": "response.incomplete",
            "error": "response.failed",
        }[reason]
    )
    try:
        resp = asyncio.run(Core(task()).create_response(parse_request(BODY), "rid"))
    except ApiError as e:
        assert reason == "error"
        assert_valid(error_body_problems(e.body()), f"{reason}: error body")
    else:
        assert_valid(response_problems(json.loads(resp.model_dump_json())), f"{reason}: response")


def test_deltas_that_are_ready_together_leave_in_one_batch_and_the_final_steps_with_the_tail():
    """A delta leaves in the step that made it; one made in the final's step goes in the tail's
    write, and deltas ready together (a consumer behind) share one write."""

    def batches_of(joined):
        task = FakeTask(
            [TokenEvent("x", [5], c) for c in "abcd"] + [final("stop", "abcd")], frozenset(joined)
        )
        core = Core(task)

        async def go():
            p = core.prepare(parse_request({**BODY, "stream": True}), "rid")
            return [b async for b in core.stream_batches(p)]

        def types(batch):  # a message's tail stands for its events
            flat = [x for e in batch for x in (e.events() if isinstance(e, MessageTail) else [e])]
            return [e.type.removeprefix("response.") for e in flat]

        return [types(b) for b in asyncio.run(go())][1:]

    delta = "output_text.delta"
    tail = ["output_text.done", "content_part.done", "output_item.done", "completed"]
    assert batches_of(()) == [[delta]] * 4 + [tail]
    assert batches_of({4}) == [[delta]] * 3 + [[delta, *tail]]
    assert batches_of({2, 3}) == [[delta], [delta, delta, delta], tail]
