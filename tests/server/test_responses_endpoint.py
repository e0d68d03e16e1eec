"""POST /v1/responses as a raw ASGI endpoint, in-process (no model): its dispatch past FastAPI's
router, the other methods on its path, and a client that leaves before its body is in."""

from __future__ import annotations

import asyncio

from starlette.testclient import TestClient

from fixtures.fake_task import FakeTask, final
from qualflow.server.app import create_app
from qualflow.server.http.responses_endpoint import DirectRoutes


def _recorder(name: str, calls: list):
    async def app(scope, receive, send):
        calls.append((name, scope["type"], scope.get("method"), scope.get("path")))

    return app


def test_direct_routes_serve_their_method_and_path_and_pass_on_everything_else():
    calls: list = []
    app = DirectRoutes(
        _recorder("behind", calls), routes={("POST", "/v1/responses"): _recorder("direct", calls)}
    )

    async def go():
        for scope in (
            {"type": "http", "method": "POST", "path": "/v1/responses"},
            {"type": "http", "method": "GET", "path": "/v1/responses"},
            {"type": "http", "method": "POST", "path": "/v1/responses/x"},
            {"type": "lifespan"},
        ):
            await app(scope, None, None)

    asyncio.run(go())
    assert [c[0] for c in calls] == ["direct", "behind", "behind", "behind"]


def test_another_method_on_the_path_is_a_405_in_openai_shape_with_the_request_id():
    with TestClient(create_app(task=FakeTask([final("stop")]))) as c:
        r = c.get("/v1/responses", headers={"X-Request-ID": "wrong-verb"})
        assert r.status_code == 405 and r.headers["x-request-id"] == "wrong-verb"
        assert r.json()["error"]["type"] == "invalid_request_error"
        r = c.post(
            "/v1/responses",
            json={"model": "fake", "input": "x", "max_output_tokens": 4},
            headers={"X-Request-ID": "right-verb"},
        )
        assert r.status_code == 200 and r.headers["x-request-id"] == "right-verb"
        assert r.json()["status"] == "completed"


def test_a_client_that_leaves_mid_body_is_cancelled_and_frees_its_slot():
    app = create_app(task=FakeTask([final("stop")]))
    sent: list = []
    messages = [
        {"type": "http.request", "body": b'{"model": "fake", ', "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/responses",
        "raw_path": b"/v1/responses",
        "query_string": b"",
        "root_path": "",
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", b"100"),
            (b"x-request-id", b"leaver"),
        ],
    }
    with TestClient(app) as c:
        c.portal.call(app, scope, receive, send)
        rec = c.get("/v1/qualflow/task-timings", params={"request_ids": "leaver"}).json()["data"][0]
        assert (
            rec["status"] == "cancelled"
            and rec["http_status"] == 499
            and rec["http_sent_ns"] is not None
        )
        assert app.state.admission.active == 0
        assert sent[0]["status"] == 499  # nobody reads it; uvicorn drops a send after a disconnect
