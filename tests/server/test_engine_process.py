"""`qualflow serve --engine-process on` over real uvicorn on CPU: greedy streams identical to the
in-process engine's, timing records ordered, client disconnect cancels the engine request, a
killed engine process fails its open streams (`error` + `response.failed`), turns /health
unhealthy and new requests into 503, and no process is left after the server stops, gracefully or
killed."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import httpx
import pytest

from fixtures.procs import descendants, wait_gone
from fixtures.server import InProcessServer, ServerUnderTest
from fixtures.sse import check_stream, leave_after_deltas, sse_frames

pytestmark = pytest.mark.timeout(180)
ARGS = ("--engine-process", "on", "--max-batch", "4", "--max-context", "256")
BODIES = [
    {
        "model": "m",
        "input": text,
        "stream": True,
        "temperature": 0,
        "max_output_tokens": 24,
        "ignore_eos": True,
    }
    for text in ("Hello", "Tell me about the sea", "1 2 3 4")
]


def engine_pid(server_pid: int) -> int:
    found = []
    for p in descendants(server_pid):
        try:
            cmd = open(f"/proc/{p}/cmdline", "rb").read()
        except OSError:
            continue
        if b"spawn_main" in cmd and b"resource_tracker" not in cmd:
            found.append(p)
    assert len(found) == 1, found
    return found[0]


def stream_text(url: str, body: dict, rid: str) -> str:
    r = httpx.post(url + "/v1/responses", json=body, headers={"X-Request-ID": rid}, timeout=60)
    assert r.status_code == 200
    return check_stream(sse_frames(r.text))


def test_engine_process_serves_like_the_thread(bundle_dir, tmp_path):
    from qualflow.runtime import EngineConfig, load_task
    from qualflow.server.app import create_app

    local = load_task(bundle_dir, EngineConfig(max_batch=4, max_context=256))
    with InProcessServer(create_app(task=local, model_name="m")) as ref:
        want = [stream_text(ref.url, b, f"ref-{i}") for i, b in enumerate(BODIES)]
    srv = ServerUnderTest(bundle_dir, tmp_path, *ARGS, model_name="m").start()
    try:
        pid = engine_pid(srv.proc.pid)
        assert [stream_text(srv.url, b, f"s-{i}") for i, b in enumerate(BODIES)] == want
        for i in range(len(BODIES)):
            r = srv.wait_record(f"s-{i}")
            assert (
                r["status"] == "incomplete"
                and r["finish_reason"] == "length"
                and r["output_tokens"] == 24
            )
            assert (
                r["http_received_ns"]
                <= r["submitted_ns"]
                <= r["first_scheduled_ns"]
                <= r["first_token_ns"]
                <= r["finished_ns"]
                <= r["http_sent_ns"]
            )
            assert r["public_task_call_wall_ns"] == r["finished_ns"] - r["submitted_ns"]
        # a client that leaves cancels the engine's request
        body = {**BODIES[0], "max_output_tokens": 200}
        leave_after_deltas(srv.url, body, "gone")
        rec = srv.wait_record("gone")
        assert (
            rec["status"] == "cancelled"
            and rec["finish_reason"] == "cancelled"
            and rec["output_tokens"] < 200
        )
        # a graceful stop (SIGTERM to the server's process group, as the session stops it) closes
        # the engine through the server, which stays healthy until it does
        below = descendants(srv.proc.pid)
        assert pid in below
        streaming = threading.Event()

        def stream_at_stop():
            with (
                httpx.Client(timeout=60) as c,
                c.stream(
                    "POST",
                    srv.url + "/v1/responses",
                    json=body,
                    headers={"X-Request-ID": "at-stop"},
                ) as r,
            ):
                for line in r.iter_lines():
                    if line.startswith("event: response.output_text.delta"):
                        streaming.set()

        late = threading.Thread(target=stream_at_stop)
        late.start()
        assert streaming.wait(20)
        os.killpg(srv.proc.pid, signal.SIGTERM)
        srv.proc.wait(timeout=30)  # uvicorn re-raises the SIGTERM after its graceful shutdown
        assert wait_gone(below) == []
        late.join(timeout=30)
        at_stop = [
            json.loads(x) for x in srv.timing_log.read_text().splitlines() if '"at-stop"' in x
        ]
        assert at_stop and at_stop[-1]["status"] != "failed", (
            at_stop
        )  # not cut by an engine dying first
        assert "Traceback" not in srv.log()
    finally:
        srv.stop()
        local.close()


def test_killed_engine_process_gives_503_and_no_orphans(bundle_dir, tmp_path):
    srv = ServerUnderTest(
        bundle_dir, tmp_path, *ARGS, "--step-delay-s", "0.02", model_name="m"
    ).start()
    try:
        # a stream open when the engine process dies ends with `error` + `response.failed`
        out, streaming = {}, threading.Event()

        def open_stream():
            with (
                httpx.Client(timeout=60) as c,
                c.stream(
                    "POST",
                    srv.url + "/v1/responses",
                    headers={"X-Request-ID": "open"},
                    json={**BODIES[0], "max_output_tokens": 200},
                ) as r,
            ):
                text = ""
                for chunk in r.iter_text():
                    text += chunk
                    if "event: response.output_text.delta" in text:
                        streaming.set()
                out["text"] = text

        t = threading.Thread(target=open_stream)
        t.start()
        assert streaming.wait(30)
        os.kill(engine_pid(srv.proc.pid), signal.SIGKILL)
        t.join(timeout=30)
        frames = sse_frames(out["text"])
        assert [k for k, _ in frames][-2:] == ["error", "response.failed"], [k for k, _ in frames][
            -4:
        ]
        assert "engine process" in frames[-1][1]["response"]["error"]["message"]
        assert srv.wait_record("open")["status"] == "failed"
        deadline = time.monotonic() + 5
        while (
            h := httpx.get(srv.url + "/health", timeout=5)
        ).status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert h.status_code == 503 and h.json()["status"] == "failed"
        assert "engine process" in h.json()["error"] and "signal 9" in h.json()["error"]
        t0 = time.monotonic()
        r = httpx.post(srv.url + "/v1/responses", json={**BODIES[0], "stream": False}, timeout=30)
        assert (
            r.status_code == 503
            and r.json()["error"]["code"] == "engine_failed"
            and time.monotonic() - t0 < 2
        )
        # the server killed outright (not its group) leaves nothing behind
        below = descendants(srv.proc.pid)
        os.kill(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait(timeout=10)
        assert wait_gone(below) == []
    finally:
        srv.stop()


def test_killed_server_takes_its_engine_process_along(bundle_dir, tmp_path):
    srv = ServerUnderTest(bundle_dir, tmp_path, *ARGS, model_name="m").start()
    try:
        pid = engine_pid(srv.proc.pid)
        below = descendants(srv.proc.pid)
        os.kill(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait(timeout=10)
        assert wait_gone(below) == [] and pid in below
    finally:
        srv.stop()
