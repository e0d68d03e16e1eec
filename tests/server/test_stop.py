"""The `completed` path (finish reason stop) end to end on the embedded default, and the strict
`responses.stream()` helper.

The embedded default's weights carry a stop clock (families/qwen3/stop_clock.py): greedy
decoding, and sampling, end with `<|im_end|>` some forty tokens after the assistant header. So a
request that sets no `max_output_tokens`, as an agent client sends it, ends `completed` within
seconds on a CPU."""

from __future__ import annotations

import time

import httpx
import pytest

from fixtures.server import ServerUnderTest

MODEL = "qualflow-stop"
PROMPT = "Hello there"
NATURAL_MAX = 64  # "tens of tokens": the clock turns 48 tokens after <|im_start|>
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def srv(bundle_dir, tmp_path_factory):
    s = ServerUnderTest(bundle_dir, tmp_path_factory.mktemp("stop"), model_name=MODEL).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def natural(srv):
    """Output tokens of PROMPT's greedy response with no max_output_tokens (the natural stop)."""
    resp = srv.client().responses.create(
        model=MODEL, input=PROMPT, temperature=0, extra_headers={"X-Request-ID": "natural"}
    )
    return resp, srv.wait_record("natural")


def test_default_request_ends_completed_with_a_stop(natural):
    resp, rec = natural
    assert resp.status == "completed" and resp.incomplete_details is None and resp.error is None
    assert resp.completed_at and resp.output[0].status == "completed" and resp.output_text
    assert resp.max_output_tokens is None and 16 < resp.usage.output_tokens <= NATURAL_MAX
    assert rec["status"] == "completed" and rec["finish_reason"] == "stop"
    assert rec["output_tokens"] == resp.usage.output_tokens


def test_agent_style_call_completes_in_seconds(srv):
    """What an agent client sends: instructions, a conversation with an earlier assistant turn,
    the server's default sampling, no max_output_tokens. (Its SDK raises on any `incomplete`
    response.)"""
    convo = [
        {"role": "user", "content": "Plan a three-step trip to Lisbon."},
        {"role": "assistant", "content": "Step one: book the flight."},
        {"role": "user", "content": "And then?"},
    ]
    t0 = time.monotonic()
    resp = srv.client(timeout=120).responses.create(
        model=MODEL, instructions="You are a travel agent.", input=convo
    )
    wall = time.monotonic() - t0
    assert (
        resp.status == "completed"
        and 0 < resp.usage.output_tokens <= NATURAL_MAX
        and resp.output_text
    )
    assert wall < 60, f"the agent call took {wall:.1f} s"  # ~1.5 s on a quiet 2-core CPU


def test_stream_helper_final_response(srv, natural):
    """The strict helper on the natural stop; greedy, it gives the same text again (deterministic
    per prompt)."""
    with srv.client().responses.stream(model=MODEL, input=PROMPT, temperature=0) as s:
        events = list(s)
        final = s.get_final_response()
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert events[-1].type == "response.completed" and final.status == "completed"
    assert final.output_text == deltas == natural[0].output_text
    assert final.usage.output_tokens == natural[0].usage.output_tokens
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_benchmark_extensions_override_the_stop(srv, natural):
    """min_tokens suppresses stop tokens before N tokens; ignore_eos never stops (non-OpenAI
    extensions)."""
    n = natural[0].usage.output_tokens
    body = {"model": MODEL, "input": PROMPT, "max_output_tokens": n + 4, "temperature": 0}
    r = httpx.post(srv.url + "/v1/responses", json={**body, "min_tokens": n + 2}, timeout=60).json()
    assert r["usage"]["output_tokens"] >= n + 2
    r = httpx.post(srv.url + "/v1/responses", json={**body, "ignore_eos": True}, timeout=60).json()
    assert r["status"] == "incomplete" and r["usage"]["output_tokens"] == n + 4


def test_truncation_before_the_stop_is_incomplete(srv):
    """A limit below the natural stop still cuts the response (no extensions needed)."""
    resp = srv.client().responses.create(
        model=MODEL, input=PROMPT, max_output_tokens=12, temperature=0
    )
    assert resp.status == "incomplete" and resp.incomplete_details.reason == "max_output_tokens"
    assert resp.usage.output_tokens == 12
