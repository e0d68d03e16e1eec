"""`qualflow serve --engine synthetic --step-ms X` over real uvicorn, driven by the pinned openai
SDK: no model, one token per request per step, through the real tokenizer, HTTP path and timing
records. The token gaps follow the step clock (checked loosely: counts and order exactly, the
median gap within a wide factor of the step), and a client that leaves cancels its synthetic
request."""

from __future__ import annotations

import statistics
import time

import httpx
import pytest

from fixtures.server import ServerUnderTest
from fixtures.sse import leave_after_deltas

pytestmark = pytest.mark.timeout(180)
STEP_MS = 20
N = 12


@pytest.fixture(scope="module")
def srv(bundle_dir, tmp_path_factory):
    s = ServerUnderTest(
        bundle_dir,
        tmp_path_factory.mktemp("synthetic"),
        "--engine",
        "synthetic",
        "--step-ms",
        str(STEP_MS),
        "--max-batch",
        "4",
        model_name="m",
    ).start()
    yield s
    s.stop()


def test_health_says_synthetic_engine(srv):
    h = httpx.get(srv.url + "/health", timeout=10).json()
    assert h["status"] == "ok" and h["load_timing"]["graph_capture_s"] == 0.0


def test_streamed_deltas_follow_the_step_clock_and_are_recorded(srv):
    client = srv.client()
    kinds, text, deltas = [], "", 0
    for ev in client.responses.create(
        model="m",
        input="Hello there",
        max_output_tokens=N,
        stream=True,
        extra_headers={"X-Request-ID": "syn-1"},
    ):
        kinds.append(ev.type)
        if ev.type == "response.output_text.delta":
            deltas += 1
            text += ev.delta
        final = getattr(ev, "response", None)
    assert (
        kinds[0] == "response.created" and kinds[-1] == "response.incomplete"
    )  # max_output_tokens hit
    assert final.usage.output_tokens == N and final.output_text == text and text
    assert deltas >= N // 2  # a delta per step (a token that is a partial character may wait)
    rec = srv.wait_record("syn-1")
    assert (
        rec["status"] == "incomplete"
        and rec["finish_reason"] == "length"
        and rec["output_tokens"] == N
    )
    assert (
        rec["http_received_ns"]
        <= rec["submitted_ns"]
        <= rec["first_scheduled_ns"]
        <= rec["first_token_ns"]
        <= rec["finished_ns"]
        <= rec["http_sent_ns"]
    )
    # the engine's clock: N tokens take at least N - 1 steps (it never bursts to catch up)
    assert rec["decode_ns"] >= 0.9 * (N - 1) * STEP_MS * 1e6
    # and the deltas leave on that clock: their arrival gaps (read off the wire with httpx, as the
    # SDK's iterator may hand over several at once) have a median near the step
    arrivals = []
    with (
        httpx.Client(timeout=60) as c,
        c.stream(
            "POST",
            srv.url + "/v1/responses",
            headers={"X-Request-ID": "syn-2"},
            json={"model": "m", "input": "Hello", "stream": True, "max_output_tokens": N},
        ) as r,
    ):
        for line in r.iter_lines():
            if line.startswith("event: response.output_text.delta"):
                arrivals.append(time.monotonic())
    assert len(arrivals) >= N // 2 and srv.wait_record("syn-2")["output_tokens"] == N
    gaps_ms = [(b - a) * 1e3 for a, b in zip(arrivals, arrivals[1:])]
    assert STEP_MS / 4 <= statistics.median(gaps_ms) <= STEP_MS * 10, gaps_ms


def test_concurrent_streams_share_the_steps(srv):
    import concurrent.futures as cf

    def one(i):
        r = httpx.post(
            srv.url + "/v1/responses",
            json={"model": "m", "input": f"hi {i}", "max_output_tokens": 50},
            headers={"X-Request-ID": f"syn-c{i}"},
            timeout=60,
        )
        return r.status_code, r.json()["usage"]["output_tokens"]

    with cf.ThreadPoolExecutor(4) as ex:
        assert list(ex.map(one, range(4))) == [(200, 50)] * 4
    recs = [srv.wait_record(f"syn-c{i}") for i in range(4)]
    assert all(r["finish_reason"] == "length" and r["output_tokens"] == 50 for r in recs)
    # four requests in a batch of four run side by side (one token each per step), not one after
    # another
    assert max(r["first_token_ns"] for r in recs) < min(r["finished_ns"] for r in recs)


def test_disconnect_cancels_the_synthetic_request(srv):
    body = {"model": "m", "input": "Go on", "stream": True, "max_output_tokens": 1500}
    leave_after_deltas(srv.url, body, "syn-gone")
    rec = srv.wait_record("syn-gone")
    assert (
        rec["status"] == "cancelled"
        and rec["finish_reason"] == "cancelled"
        and 3 <= rec["output_tokens"] < 1500
    )
