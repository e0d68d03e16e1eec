"""The Responses server over HTTP: a real `qualflow serve` subprocess on the embedded default
bundle, driven by the real (pinned) openai SDK and by raw HTTP where the wire itself is the
point."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import httpx
import openai
import pytest

from fixtures.published_schemas import (
    assert_valid,
    error_body_problems,
    event_problems,
    response_problems,
)
from fixtures.server import ServerUnderTest
from fixtures.sse import check_stream, leave_after_deltas, sse_frames

MODEL = "qualflow-test"
pytestmark = pytest.mark.timeout(300)


def test_openai_sdk_is_the_pinned_one():
    assert openai.__version__ == "3.57.0"


@pytest.fixture(scope="module")
def srv(bundle_dir, tmp_path_factory):
    s = ServerUnderTest(bundle_dir, tmp_path_factory.mktemp("server"), model_name=MODEL).start()
    yield s
    assert s.stop() in (0, -15) and "Application shutdown complete" in s.log(), s.log()[
        -3000:
    ]  # uvicorn re-raises SIGTERM


@pytest.fixture(scope="module")
def client(srv):
    return srv.client()


def post(srv, body, headers=None, timeout=60) -> httpx.Response:
    return httpx.post(
        srv.url + "/v1/responses",
        json=body if isinstance(body, dict) else None,
        content=None if isinstance(body, dict) else body,
        headers=headers,
        timeout=timeout,
    )


# ---------------------------------------------------------------- ops


def test_health_and_models(srv, client):
    h = httpx.get(srv.url + "/health").json()
    assert h["status"] == "ok" and h["model"] == MODEL
    assert h["load_s"] > 0 and h["startup_s"] >= h["load_s"]
    assert [m.id for m in client.models.list().data] == [MODEL]


def test_unknown_route_is_openai_shaped(srv):
    r = httpx.get(srv.url + "/v1/nope")
    assert r.status_code == 404 and set(r.json()["error"]) == {"message", "type", "param", "code"}


def test_port_in_use_is_a_clear_error(srv, bundle_dir):
    port = srv.url.rsplit(":", 1)[1]
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "qualflow.cli",
            "serve",
            "--bundle",
            str(bundle_dir),
            "--port",
            port,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode != 0 and f"port {port}" in p.stderr and "in use" in p.stderr


# -------------------------------------------------------------------------------------- generation


def test_non_stream(srv, client):
    r = client.responses.with_raw_response.create(
        model=MODEL,
        input="Hello there",
        instructions="Be brief.",
        max_output_tokens=16,
        temperature=0.5,
        top_p=0.9,
    )
    resp = r.parse()
    assert r.headers["x-request-id"]
    assert (
        resp.object == "response"
        and resp.id.startswith("resp_")
        and resp.status in ("completed", "incomplete")
    )
    msg = resp.output[0]
    assert msg.type == "message" and msg.id.startswith("msg_") and msg.role == "assistant"
    assert (
        msg.content[0].type == "output_text"
        and msg.content[0].annotations == []
        and msg.content[0].logprobs == []
    )
    assert (
        resp.model,
        resp.temperature,
        resp.top_p,
        resp.max_output_tokens,
        resp.instructions,
    ) == (MODEL, 0.5, 0.9, 16, "Be brief.")
    u = resp.usage
    assert (
        u.input_tokens > 0
        and 0 < u.output_tokens <= 16
        and u.total_tokens == u.input_tokens + u.output_tokens
    )
    assert (
        u.input_tokens_details.cached_tokens == 0 and u.output_tokens_details.reasoning_tokens == 0
    )
    raw = json.loads(r.http_response.text)
    assert "output_text" not in raw  # SDK-only convenience property, not on the wire


def test_turn_two_is_served_from_the_prefix_cache(srv, client):
    """Turn 2 re-sends turn 1's prompt and output: its prompt's shared full blocks come from the
    engine's prefix cache, counted in usage and on the timing record."""
    first = {"role": "user", "content": "Count the waves on the northern shore, one by one, slowly"}
    r1 = client.responses.create(model=MODEL, input=[first], max_output_tokens=8, temperature=0)
    assert r1.usage.input_tokens_details.cached_tokens == 0  # nothing before shares its prompt
    turn2 = [
        first,
        {"role": "assistant", "content": r1.output_text},
        {"role": "user", "content": "And on the southern one?"},
    ]
    r2 = client.responses.with_raw_response.create(
        model=MODEL,
        input=turn2,
        max_output_tokens=4,
        temperature=0,
        extra_headers={"X-Request-ID": "turn-2"},
    )
    usage = r2.parse().usage
    cached = usage.input_tokens_details.cached_tokens
    assert 0 < cached < usage.input_tokens and cached % 16 == 0  # full blocks of 16 (cpu)
    assert srv.wait_record("turn-2")["cached_tokens"] == cached


def test_stream_raw_events_and_greedy_equivalence(srv, client):
    body = {
        "model": MODEL,
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Count to ten"}],
            }
        ],
        "max_output_tokens": 12,
        "temperature": 0,
    }
    r = post(srv, {**body, "stream": True})
    assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream; charset=utf-8"
    streamed = check_stream(sse_frames(r.text))
    sdk_events = list(client.responses.create(**body, stream=True))
    assert (
        "".join(e.delta for e in sdk_events if e.type == "response.output_text.delta") == streamed
    )
    plain = client.responses.create(**body)
    assert plain.output_text == streamed and streamed


def test_truncation_is_incomplete(srv, client):
    body = {"model": MODEL, "input": "Tell me a long story", "max_output_tokens": 3}
    resp = client.responses.create(**body, extra_body={"ignore_eos": True, "min_tokens": 3})
    assert resp.status == "incomplete" and resp.incomplete_details.reason == "max_output_tokens"
    assert resp.usage.output_tokens == 3 and resp.output[0].status == "incomplete"
    frames = sse_frames(post(srv, {**body, "stream": True, "ignore_eos": True}).text)
    check_stream(frames)
    assert frames[-1][0] == "response.incomplete"
    assert frames[-1][1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_objects_validate_strictly_against_the_published_types(srv):
    """The served Response (non-stream), every event of a stream, and an unknown route's error body,
    as sent on the wire, under the openai SDK's and the Open Responses types (completed and failed
    ones: tests/server/test_protocol.py, which can make them happen)."""
    body = {
        "model": MODEL,
        "input": "Say hi",
        "max_output_tokens": 4,
        "temperature": 0,
        "user": "u",
        "metadata": {"k": "v"},
    }
    r = post(srv, body)
    assert r.status_code == 200
    assert_valid(response_problems(r.json()), "the non-stream response")
    frames = sse_frames(post(srv, {**body, "stream": True}).text)
    for kind, data in frames:
        assert_valid(event_problems(data), f"the {kind} event")
    assert {"response.created", "response.in_progress", "response.output_text.delta"} <= {
        k for k, _ in frames
    }
    assert_valid(error_body_problems(httpx.get(srv.url + "/v1/nope").json()), "the 404 body")


def test_accepted_and_ignored_fields(client):
    resp = client.responses.create(
        model=MODEL,
        input="hi",
        max_output_tokens=4,
        metadata={"k": "v"},
        user="u",
        safety_identifier="s",
        prompt_cache_key="p",
        service_tier="auto",
        parallel_tool_calls=False,
        truncation="disabled",
        tool_choice="auto",
        tools=[],
        include=[],
        top_logprobs=0,
        background=False,
        text={"format": {"type": "text"}, "verbosity": "low"},
        reasoning={"effort": None},
        extra_body={"stream_options": {"include_usage": True}, "ignore_eos": True, "min_tokens": 4},
    )
    assert resp.status == "incomplete" and resp.usage.output_tokens == 4
    assert resp.metadata == {"k": "v"} and resp.parallel_tool_calls is False and resp.store is False


def test_store_true_without_a_store_is_a_clear_400(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model=MODEL, input="hi", max_output_tokens=4, store=True)
    assert e.value.param == "store" and "--store" in e.value.message


def test_sixteen_concurrent_streams(srv):
    async def one(c, i):
        body = {
            "model": MODEL,
            "input": f"Request number {i}",
            "max_output_tokens": 4 + i % 5,
            "stream": True,
            "ignore_eos": True,
        }
        r = await c.post(
            srv.url + "/v1/responses", json=body, headers={"X-Request-ID": f"conc-{i}"}
        )
        return r.status_code, r.headers["x-request-id"], r.text, 4 + i % 5

    async def main():
        async with httpx.AsyncClient(timeout=120) as c:
            return await asyncio.gather(*(one(c, i) for i in range(16)))

    for i, (status, rid, text, n) in enumerate(asyncio.run(main())):
        assert status == 200 and rid == f"conc-{i}"
        frames = sse_frames(text)
        check_stream(frames)
        assert frames[-1][1]["response"]["usage"]["output_tokens"] == n
    recs = srv.records(*(f"conc-{i}" for i in range(16)))
    assert sorted(r["request_id"] for r in recs) == sorted(f"conc-{i}" for i in range(16))
    assert all(r["finish_reason"] == "length" and r["stream"] for r in recs)


# ----------------------------------------------------------------------------- identity and timing


def test_request_id_round_trip_and_timing_record(srv, client):
    t0 = time.time_ns()
    r = client.responses.with_raw_response.create(
        model=MODEL,
        input="hi",
        max_output_tokens=5,
        extra_headers={"X-Request-ID": "rid-1", "X-Qualflow-Phase": "proto"},
    )
    assert r.headers["x-request-id"] == "rid-1"
    rec = srv.wait_record("rid-1")
    assert rec["response_id"] == r.parse().id and rec["tag"] == "proto" and rec["stream"] is False
    assert (
        rec["status"] in ("completed", "incomplete")
        and rec["http_status"] == 200
        and rec["error"] is None
    )
    assert (
        rec["input_tokens"] == r.parse().usage.input_tokens
        and rec["output_tokens"] == r.parse().usage.output_tokens
    )
    order = [
        "http_received_ns",
        "submitted_ns",
        "first_scheduled_ns",
        "first_token_ns",
        "finished_ns",
        "http_sent_ns",
    ]
    assert t0 <= rec["http_received_ns"] and [rec[k] for k in order] == sorted(
        rec[k] for k in order
    )
    assert rec["public_task_call_wall_ns"] == rec["finished_ns"] - rec["submitted_ns"]
    assert (
        rec["queue_wait_ns"] + rec["prefill_ns"] + rec["decode_ns"]
        == rec["public_task_call_wall_ns"]
    )
    assert [x["request_id"] for x in srv.records(tag="proto", since_ns=t0)] == ["rid-1"]
    assert srv.records(since_ns=time.time_ns()) == []
    # a generated id when the client sends none; it is on the record too
    gen = post(srv, {"model": MODEL, "input": "hi", "max_output_tokens": 2}).headers["x-request-id"]
    assert gen and srv.wait_record(gen)["request_id"] == gen
    # errors carry the id: header, message and a record
    bad = post(srv, {"model": "nope", "input": "hi"}, headers={"X-Request-ID": "rid-bad"})
    assert bad.headers["x-request-id"] == "rid-bad" and "rid-bad" in bad.json()["error"]["message"]
    rec = srv.wait_record("rid-bad")
    assert rec["status"] == "rejected" and rec["http_status"] == 400 and "nope" in rec["error"]
    # the JSONL timing log holds the same final records
    logged = [json.loads(x) for x in srv.timing_log.read_text().splitlines()]
    assert {"rid-1", "rid-bad", gen} <= {x["request_id"] for x in logged}


def test_disconnect_cancels_the_task_request(srv):
    body = {
        "model": MODEL,
        "input": "Go on forever",
        "stream": True,
        "ignore_eos": True,
        "max_output_tokens": 1500,
    }
    leave_after_deltas(srv.url, body, "gone-1")
    rec = srv.wait_record("gone-1")
    # the engine itself ended the request as cancelled, long before its 1500 tokens
    assert rec["status"] == "cancelled" and rec["finish_reason"] == "cancelled"
    assert 3 <= rec["output_tokens"] < 1500 and rec["finished_ns"] >= rec["first_token_ns"]
    # a non-streaming client that gives up cancels its request too
    with pytest.raises(httpx.ReadTimeout):
        post(srv, {**body, "stream": False}, headers={"X-Request-ID": "gone-2"}, timeout=1.5)
    rec = srv.wait_record("gone-2")
    assert (
        rec["status"] == "cancelled"
        and rec["finish_reason"] == "cancelled"
        and rec["output_tokens"] < 1500
    )
    # and the server is fine afterwards
    assert post(srv, {"model": MODEL, "input": "hi", "max_output_tokens": 2}).status_code == 200


# ----------------------------------------------------------------------------- reject, don't imply

BASE = {"model": MODEL, "input": "hi", "max_output_tokens": 4}
REJECT = [  # (body changes, code, param); None deletes the key
    ({"previous_response_id": "resp_123"}, "previous_response_not_found", "previous_response_id"),
    ({"conversation": "conv_1"}, "unsupported_parameter", "conversation"),
    ({"background": True}, "unsupported_value", "background"),
    ({"prompt": {"id": "pmpt_1"}}, "unsupported_parameter", "prompt"),
    ({"tools": [{"type": "web_search"}]}, "unsupported_value", "tools[0].type"),
    ({"tool_choice": "required"}, "invalid_value", "tool_choice"),
    ({"tool_choice": {"type": "function", "name": "f"}}, "invalid_value", "tool_choice.name"),
    ({"reasoning": {"effort": "low", "summary": "auto"}}, "unsupported_value", "reasoning.summary"),
    ({"include": ["reasoning.encrypted_content"]}, "unsupported_value", "include"),
    ({"text": {"format": {"type": "xml"}}}, "invalid_value", "text.format.type"),
    (
        {"text": {"format": {"type": "json_schema", "name": "x"}}},
        "missing_required_parameter",
        "text.format.schema",
    ),
    ({"include": ["message.output_text.logprobs"]}, "unsupported_value", "include"),
    ({"top_logprobs": 2}, "unsupported_value", "top_logprobs"),
    ({"truncation": "auto"}, "unsupported_value", "truncation"),
    (
        {"context_management": [{"type": "compaction"}]},
        "unsupported_parameter",
        "context_management",
    ),
    (
        {
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "a"},
                        {"type": "input_image", "image_url": "data:,"},
                    ],
                }
            ]
        },
        "unsupported_value",
        "input[0].content[1].type",
    ),
    (
        {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
        "unsupported_value",
        "input[0].content[0].type",
    ),
    (
        {"input": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]},
        "unsupported_value",
        "input[0].content[0].type",
    ),
    (
        {"input": ["hi", {"type": "function_call_output", "call_id": "c", "output": "x"}]},
        "invalid_type",
        "input[0]",
    ),
    (
        {"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]},
        "invalid_value",
        "input[0].call_id",
    ),
    ({"input": [{"type": "reasoning", "summary": []}]}, "unsupported_value", "input[0].type"),
    ({"input": [{"role": "robot", "content": "x"}]}, "invalid_value", "input[0].role"),
    ({"input": [{"role": "user", "content": "x", "foo": 1}]}, "unknown_parameter", "input[0].foo"),
    ({"input": []}, "invalid_value", "input"),
    ({"input": None}, "missing_required_parameter", "input"),
    ({"model": None}, "missing_required_parameter", "model"),
    ({"model": "gpt-4o"}, "model_not_found", "model"),
    ({"foo": 1}, "unknown_parameter", "foo"),
    ({"seed": 1}, "unknown_parameter", "seed"),
    ({"temperature": 2.5}, "decimal_above_max_value", "temperature"),
    ({"temperature": -1}, "decimal_below_min_value", "temperature"),
    ({"top_p": 0}, "decimal_below_min_value", "top_p"),
    ({"top_p": 1.5}, "decimal_above_max_value", "top_p"),
    ({"max_output_tokens": 0}, "integer_below_min_value", "max_output_tokens"),
    ({"min_tokens": -1}, "integer_below_min_value", "min_tokens"),
    ({"min_tokens": 9}, "invalid_value", "min_tokens"),
    ({"metadata": {f"k{i}": "v" for i in range(17)}}, "invalid_value", "metadata"),
    ({"service_tier": "turbo"}, "invalid_value", "service_tier"),
    ({"temperature": "hot"}, "invalid_type", "temperature"),
    ({"stream": "yes"}, "invalid_type", "stream"),
    ({"max_output_tokens": 4.5}, "invalid_type", "max_output_tokens"),
    ({"input": 5}, "invalid_type", "input"),
    ({"text": {"format": {"type": "text"}, "colour": 1}}, "unknown_parameter", "text.colour"),
    ({"max_output_tokens": 100_000}, "context_length_exceeded", "input"),
    ({"input": "word " * 4000, "max_output_tokens": None}, "context_length_exceeded", "input"),
]


@pytest.mark.parametrize("change,code,param", REJECT, ids=[f"{p}:{c}" for _, c, p in REJECT])
def test_rejections(srv, change, code, param):
    body = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    r = post(srv, body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert (err["code"], err["param"], err["type"]) == (code, param, "invalid_request_error"), err
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    assert_valid(error_body_problems(r.json()), f"the {code} body")


def test_rejections_through_the_sdk(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model=MODEL, input="hi", previous_response_id="resp_1")
    assert (e.value.status_code, e.value.code, e.value.param) == (
        400,
        "previous_response_not_found",
        "previous_response_id",
    )
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model=MODEL, input="hi", extra_body={"top_k": 5})
    assert (e.value.code, e.value.param, e.value.type) == (
        "unknown_parameter",
        "top_k",
        "invalid_request_error",
    )


@pytest.mark.parametrize("raw", [b"{", b"not json", b"[1, 2]", b"\xff\xfe", b""])
def test_malformed_body_is_400_openai_shape(srv, raw):
    r = post(srv, raw, headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert (
        r.json()["error"]["code"] == "invalid_json"
        and r.json()["error"]["type"] == "invalid_request_error"
    )
