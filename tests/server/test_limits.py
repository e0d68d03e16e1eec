"""Admission control and request limits over a real `qualflow serve`: 429 + Retry-After at the queue
bound (and /health still answering), 413 over the body cap, 415 for non-JSON bodies, the contract
nits, and no record left in progress after any of them; with the engine on a thread and in its own
process."""

from __future__ import annotations

import statistics
import threading
import time

import httpx
import pytest

from fixtures.server import ServerUnderTest

MODEL = "qualflow-limits"
pytestmark = pytest.mark.timeout(300)
BODY = {"model": MODEL, "input": "hi", "max_output_tokens": 4}


@pytest.fixture(scope="module", params=["off", "on"], ids=["engine-thread", "engine-process"])
def srv(bundle_dir, tmp_path_factory, request):
    """Both engine modes: the limits are the HTTP side's, so they must hold whichever runs the
    engine."""
    s = ServerUnderTest(
        bundle_dir,
        tmp_path_factory.mktemp("limits"),
        "--max-batch",
        "1",
        "--max-queue",
        "1",
        "--max-body-bytes",
        "200000",
        "--step-delay-s",
        "0.02",
        "--engine-process",
        request.param,
        model_name=MODEL,
    ).start()
    yield s
    s.stop()


def post(srv, **kw) -> httpx.Response:
    return httpx.post(srv.url + "/v1/responses", timeout=60, **kw)


def test_429_at_the_queue_bound_with_retry_after(srv):
    # long enough (400 steps of 20 ms) that the bound stays full while the machine is slow; the
    # holders disconnect once the over-the-bound requests are sent
    long = {**BODY, "max_output_tokens": 400, "ignore_eos": True, "stream": True}
    held, sent = [], threading.Event()

    def hold(i):
        with httpx.stream(
            "POST",
            srv.url + "/v1/responses",
            json=long,
            headers={"X-Request-ID": f"hold-{i}"},
            timeout=60,
        ) as r:
            held.append(r.status_code)
            for _ in r.iter_raw():
                if sent.is_set():
                    break

    threads = [
        threading.Thread(target=hold, args=(i,)) for i in range(2)
    ]  # 1 running + 1 waiting = the bound
    for t in threads:
        t.start()
        time.sleep(0.3)
    health_ms, refused = [], []
    for i in range(20):
        t0 = time.perf_counter()
        assert httpx.get(srv.url + "/health", timeout=10).status_code == 200
        health_ms.append((time.perf_counter() - t0) * 1e3)
        refused.append(post(srv, json=BODY, headers={"X-Request-ID": f"over-{i}"}))
    sent.set()
    for t in threads:
        t.join()
    assert held == [200, 200]
    r = refused[0]
    assert (
        r.status_code == 429
        and r.headers["retry-after"] == "1"
        and "x-should-retry" not in r.headers
    )
    err = r.json()["error"]
    assert (err["type"], err["code"], err["param"]) == ("requests", "rate_limit_exceeded", None)
    assert all(x.status_code == 429 for x in refused)
    print(
        f"/health under overload: p50 {statistics.median(health_ms):.1f} ms, max "
        f"{max(health_ms):.1f} ms"
    )
    rec = srv.wait_record("over-0")
    assert (rec["status"], rec["http_status"]) == ("rejected", 429)
    assert post(srv, json=BODY).status_code == 200  # free again


def test_413_over_the_body_cap(srv):
    r = post(srv, json={**BODY, "input": "x" * 300_000}, headers={"X-Request-ID": "big-1"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    assert "200000" in r.json()["error"]["message"]
    rec = srv.wait_record("big-1")
    assert (rec["status"], rec["http_status"]) == ("rejected", 413)
    assert post(srv, json=BODY).status_code == 200


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded"])
def test_415_for_json_sent_as_something_else(srv, ctype):
    import json

    r = post(srv, content=json.dumps(BODY), headers={"content-type": ctype})
    assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_content_type"


NITS = [  # (body changes, code, param)
    ({"input": ""}, "invalid_value", "input"),
    ({"input": [{"role": "user", "content": ""}]}, "invalid_value", "input"),
    ({"input": [{"role": "user", "content": []}]}, "invalid_value", "input[0].content"),
    ({"input": [{"role": "user", "content": "x", "id": 7}]}, "invalid_type", "input[0].id"),
    ({"user": "u" * 100_000}, "string_above_max_length", "user"),
    ({"model": "m" * 1000}, "string_above_max_length", "model"),
]


@pytest.mark.parametrize("change,code,param", NITS, ids=[f"{p}:{c}" for _, c, p in NITS])
def test_contract_nits(srv, change, code, param):
    r = post(srv, json={**BODY, **change})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert (err["code"], err["param"]) == (code, param), err


def test_text_verbosity_is_echoed(srv):
    r = post(srv, json={**BODY, "text": {"format": {"type": "text"}, "verbosity": "low"}})
    assert r.json()["text"] == {"format": {"type": "text"}, "verbosity": "low"}
    assert post(srv, json=BODY).json()["text"]["verbosity"] == "medium"


def test_no_record_left_in_progress(srv):
    time.sleep(0.5)
    recs = srv.records()
    assert recs and all(r["status"] != "in_progress" and r["http_sent_ns"] for r in recs), [
        r for r in recs if r["status"] == "in_progress"
    ]
