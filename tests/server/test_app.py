"""The HTTP layer in-process (Starlette TestClient, no model): readiness, load failure, error
shapes."""

from __future__ import annotations

import threading
import time

from starlette.testclient import TestClient

from fixtures.fake_task import FakeTask, final
from qualflow.server.app import create_app


def wait_status(c: TestClient, status: str) -> dict:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        body = c.get("/health").json()
        if body["status"] == status:
            return body
        time.sleep(0.01)
    raise AssertionError(body)


def test_health_is_503_until_the_task_is_loaded():
    gate = threading.Event()
    task = FakeTask([final("stop")])
    task.load_timing = {"load_s": 0.5}

    def load():
        gate.wait(10)
        return task

    with TestClient(create_app(load, model_name="m")) as c:
        r = c.get("/health")
        assert r.status_code == 503 and r.json()["status"] == "loading"
        r = c.post(
            "/v1/responses", json={"model": "m", "input": "x"}, headers={"X-Request-ID": "early"}
        )
        assert r.status_code == 503 and r.json()["error"]["code"] == "model_not_ready"
        assert r.headers["x-request-id"] == "early"
        gate.set()
        body = wait_status(c, "ok")
        assert body["load_s"] == 0.5 and body["startup_s"] > 0 and body["model"] == "m"
        r = c.post("/v1/responses", json={"model": "m", "input": "x", "max_output_tokens": 4})
        assert r.status_code == 200 and r.json()["status"] == "completed"


def test_load_failure_is_reported():
    failures, called = [], threading.Event()

    def load():
        raise FileNotFoundError("no bundle here")

    def on_load_error(e):
        failures.append(e)
        called.set()

    with TestClient(create_app(load, on_load_error=on_load_error)) as c:
        body = wait_status(c, "failed")
        assert "no bundle here" in body["error"] and c.get("/health").status_code == 503
        # /health says "failed" first, then the error is logged and the callback runs (it stops
        # the server): waited for, not assumed done (it was not yet, once, on a loaded machine)
        assert called.wait(60)
    assert isinstance(failures[0], FileNotFoundError)


def test_engine_failure_non_stream_is_500_without_retry():
    with TestClient(create_app(task=FakeTask([final("error")]))) as c:
        r = c.post(
            "/v1/responses",
            json={"model": "fake", "input": "x", "max_output_tokens": 4},
            headers={"X-Request-ID": "boom-1"},
        )
        assert r.status_code == 500 and r.headers["x-should-retry"] == "false"
        assert (
            r.json()["error"]["code"] == "server_error" and "boom-1" in r.json()["error"]["message"]
        )
        rec = c.get("/v1/qualflow/task-timings", params={"request_ids": "boom-1"}).json()["data"][0]
        assert (
            rec["status"] == "failed"
            and rec["finish_reason"] == "error"
            and rec["http_status"] == 500
        )


def test_timing_query_validation():
    with TestClient(create_app(task=FakeTask([]))) as c:
        r = c.get("/v1/qualflow/task-timings", params={"since_ns": "soon"})
        assert r.status_code == 400 and r.json()["error"]["param"] == "since_ns"
        r = c.get("/v1/models")
        assert r.json()["data"][0]["id"] == "fake"
