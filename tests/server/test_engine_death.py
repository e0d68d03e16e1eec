"""A dead engine (its thread ended by an exception the engine does not catch, as a sticky device
fault would) over real uvicorn: /health turns unhealthy with the reason, open streams end with
`error` + `response.failed`, new requests get 503 at once, and no record stays in progress."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from fixtures.server import InProcessServer
from fixtures.sse import check_stream_prefix, sse_frames

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning"),
]


class DeviceLost(BaseException):
    """Not an Exception: the engine's per-step handlers do not catch it, so its thread dies."""


def test_dead_engine_fails_fast(bundle_dir):
    from qualflow.runtime import EngineConfig, load_task
    from qualflow.server.app import create_app

    task = load_task(bundle_dir, EngineConfig(max_batch=4, max_context=256))
    forward, armed = task.model.forward, threading.Event()

    def faulty(*a, **kw):
        if armed.is_set():
            raise DeviceLost("CUDA error: an illegal memory access was encountered (simulated)")
        return forward(*a, **kw)

    task.model.forward = faulty
    body = {
        "model": "m",
        "input": "Hello",
        "stream": True,
        "ignore_eos": True,
        "max_output_tokens": 200,
    }
    with InProcessServer(create_app(task=task, model_name="m")) as srv:
        assert httpx.get(srv.url + "/health").json()["status"] == "ok"
        out = {}

        def stream(i):
            r = httpx.post(
                srv.url + "/v1/responses",
                json=body,
                headers={"X-Request-ID": f"open-{i}"},
                timeout=30,
            )
            out[i] = (r.status_code, r.text)

        threads = [threading.Thread(target=stream, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while (
            len([r for r in srv.records() if r["first_token_ns"] or r["status"] == "in_progress"])
            < 2
            and time.monotonic() < deadline
        ):
            time.sleep(0.02)
        time.sleep(0.2)
        armed.set()
        t0 = time.monotonic()
        for t in threads:
            t.join(timeout=30)
        assert time.monotonic() - t0 < 10, "open streams were not failed promptly"
        for i in range(2):
            status, text = out[i]
            frames = sse_frames(text)
            types = [t for t, _ in frames]
            assert status == 200 and types[-2:] == ["error", "response.failed"], types[-4:]
            check_stream_prefix(frames)
            failed = frames[-1][1]["response"]
            assert "illegal memory access" in failed["error"]["message"]
            # the output produced so far, consistent with the *.done events before it
            done_text = frames[-5][1]["text"]
            assert failed["output"][0]["content"][0]["text"] == done_text
            assert done_text == "".join(
                d["delta"] for t, d in frames if t == "response.output_text.delta"
            )
        h = httpx.get(srv.url + "/health")
        assert h.status_code == 503 and h.json()["status"] == "failed"
        assert "DeviceLost" in h.json()["error"] and "illegal memory access" in h.json()["error"]
        t1 = time.monotonic()
        r = httpx.post(
            srv.url + "/v1/responses",
            json={**body, "stream": False},
            headers={"X-Request-ID": "late"},
            timeout=30,
        )
        assert r.status_code == 503 and time.monotonic() - t1 < 2
        assert (
            r.json()["error"]["code"] == "engine_failed"
            and r.headers.get("x-should-retry") == "false"
        )
        recs = srv.records()
        assert recs and all(x["status"] != "in_progress" and x["http_sent_ns"] for x in recs), recs
        assert {x["status"] for x in recs if x["request_id"].startswith("open-")} == {"failed"}
        assert [x["http_status"] for x in recs if x["request_id"] == "late"] == [503]
