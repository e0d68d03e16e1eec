"""503 model_not_ready while loading lets SDKs retry: Retry-After, and no `x-should-retry:
false`."""

from __future__ import annotations

import threading

from starlette.testclient import TestClient

from fixtures.fake_task import FakeTask, final
from qualflow.server.app import create_app


def test_model_not_ready_is_retryable():
    gate = threading.Event()

    def load():
        gate.wait(10)
        return FakeTask([final("stop")])

    with TestClient(create_app(load, model_name="m")) as c:
        r = c.post("/v1/responses", json={"model": "m", "input": "x"})
        assert r.status_code == 503 and r.json()["error"]["code"] == "model_not_ready"
        assert r.headers["retry-after"] == "2" and "x-should-retry" not in r.headers
        h = c.get("/health")
        assert h.status_code == 503 and h.headers["retry-after"] == "2"
        gate.set()
