"""API keys (`qualflow serve --api-key env:VAR`): Bearer auth on every /v1 route with OpenAI's 401,
/health open, and every stored object visible, continuable and deletable only with the key that
made it: another key gets, on every route, the same 404 as an unknown id (0 leaks)."""

from __future__ import annotations

import re

import httpx
import pytest

from fixtures.stateful import client, model_of, stateful_server

pytestmark = pytest.mark.timeout(300)
A, B = "key-alpha-0123456789", "key-bravo-0123456789"


@pytest.fixture(scope="module")
def srv(bundle_dir, tmp_path_factory):
    work = tmp_path_factory.mktemp("auth")
    s = stateful_server(bundle_dir, work, str(work / "store.db"), keys=(A, B)).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def owned(srv):
    """A response and a conversation (with an item) made with key A."""
    c = client(srv, A)
    r = c.responses.create(model=model_of(srv), input="secret", max_output_tokens=2)
    conv = c.conversations.create(items=[{"type": "message", "role": "user", "content": "s"}])
    item = c.conversations.items.list(conv.id).data[0].id
    return r.id, conv.id, item


def _routes(rid: str, cid: str, iid: str, model: str) -> list[tuple[str, str, dict | None]]:
    return [
        ("GET", f"/v1/responses/{rid}", None),
        ("GET", f"/v1/responses/{rid}/input_items", None),
        ("POST", "/v1/responses", {"model": model, "input": "x", "previous_response_id": rid}),
        ("POST", "/v1/responses", {"model": model, "input": "x", "conversation": cid}),
        ("GET", f"/v1/conversations/{cid}", None),
        ("POST", f"/v1/conversations/{cid}", {"metadata": {"a": "b"}}),
        ("GET", f"/v1/conversations/{cid}/items", None),
        ("POST", f"/v1/conversations/{cid}/items", {"items": [{"role": "user", "content": "i"}]}),
        ("GET", f"/v1/conversations/{cid}/items/{iid}", None),
        ("DELETE", f"/v1/conversations/{cid}/items/{iid}", None),
        ("DELETE", f"/v1/conversations/{cid}", None),
        ("DELETE", f"/v1/responses/{rid}", None),
    ]


def _anonymous(r: httpx.Response, *ids: str) -> str:
    """The error's message with the ids and the request id left out."""
    msg = re.sub(r" \(request id [^)]*\)", "", r.json()["error"]["message"])
    for i, x in zip(ids, ("resp_x", "conv_x", "x"), strict=True):
        msg = msg.replace(i, x)
    return msg.replace("'x'", "'?'")


def _send(srv, key: str | None, method: str, path: str, body) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.request(method, srv.url + path, json=body, headers=headers, timeout=30)


def test_no_or_a_wrong_key_gets_openais_401_on_every_v1_route_and_health_stays_open(srv, owned):
    model = model_of(srv)
    routes = [*_routes(*owned, model), ("GET", "/v1/models", None)]
    routes.append(("POST", "/v1/responses", {"model": model, "input": "x"}))
    for method, path, body in routes:
        for key in (None, "key-wrong-0123456789"):
            r = _send(srv, key, method, path, body)
            assert r.status_code == 401, (method, path, key, r.text)
            err = r.json()["error"]
            assert err["type"] == "invalid_request_error" and set(err) >= {"message", "code"}
            assert "0123456789" not in err["message"]  # the key is masked
    assert httpx.get(srv.url + "/health", timeout=10).status_code == 200


def test_another_key_sees_nothing_on_every_route(srv, owned):
    rid, cid, iid = owned
    leaks = []
    for method, path, body in _routes(rid, cid, iid, model_of(srv)):
        r = _send(srv, B, method, path, body)
        unknown = _send(srv, B, method, path.replace(rid, "resp_x").replace(cid, "conv_x"), body)
        if r.status_code == 200 or r.status_code != unknown.status_code:
            leaks.append((method, path, r.status_code, r.text))
        if body and "previous_response_id" in body:
            assert r.json()["error"]["code"] == "previous_response_not_found"
        elif r.status_code == 404:
            assert _anonymous(r, rid, cid, iid) == _anonymous(unknown, rid, cid, iid)
    assert leaks == []
    # and everything is still there, untouched, for its owner
    c = client(srv, A)
    assert c.responses.retrieve(rid).id == rid
    assert c.conversations.retrieve(cid).metadata == {}
    assert [i.id for i in c.conversations.items.list(cid).data] == [iid]
