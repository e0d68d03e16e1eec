"""GET /openapi.json: a valid OpenAPI 3.1 document that names every route the app serves (the raw
POST /v1/responses endpoint, served before FastAPI's router, included) and nothing else, with the
request and response models, the event stream, OpenAI-shaped errors, and the Bearer scheme when
the server takes API keys; open, as /health is."""

from __future__ import annotations

import pytest
from openapi_spec_validator import validate
from starlette.testclient import TestClient

from qualflow.server.app import add_state, create_app
from qualflow.server.http.openapi import served_routes
from qualflow.server.store import StoreConfig

KEY = "sk-openapi-test-0123456789"


@pytest.fixture
def plain():
    return create_app(task=None, model_name="m")


@pytest.fixture
def stateful(tmp_path):
    app = create_app(task=None, model_name="m")
    add_state(app, StoreConfig(url=f"sqlite:///{tmp_path / 'store.db'}"), frozenset({KEY}))
    return app


def _document(app) -> dict:
    r = TestClient(app).get("/openapi.json")  # no key: the document is open
    assert r.status_code == 200, r.text
    return r.json()


def _documented(doc: dict) -> set[tuple[str, str]]:
    return {(m.upper(), path) for path, ops in doc["paths"].items() for m in ops}


@pytest.mark.parametrize("which", ["plain", "stateful"])
def test_the_document_is_valid_and_names_exactly_the_served_routes(which, request):
    app = request.getfixturevalue(which)
    doc = _document(app)
    validate(doc)
    served = served_routes(app)
    assert ("POST", "/v1/responses") in served and ("GET", "/health") in served
    assert _documented(doc) == served
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))


def test_the_responses_endpoint_has_its_models_stream_and_errors(plain):
    doc = _document(plain)
    op = doc["paths"]["/v1/responses"]["post"]
    body = op["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/CreateResponse"}
    ok = op["responses"]["200"]["content"]
    assert ok["application/json"]["schema"] == {"$ref": "#/components/schemas/Response"}
    assert "text/event-stream" in ok
    for status in ("400", "413", "415", "429", "503"):
        err = op["responses"][status]["content"]["application/json"]["schema"]
        assert err == {"$ref": "#/components/schemas/Error"}
    schemas = doc["components"]["schemas"]
    request_fields = set(schemas["CreateResponse"]["properties"])
    assert {"model", "input", "tools", "stream", "reasoning"} <= request_fields
    assert schemas["CreateResponse"]["additionalProperties"] is False  # unknown keys are refused
    tools = schemas["CreateResponse"]["properties"]["tools"]["anyOf"][0]["items"]
    assert tools == {"$ref": "#/components/schemas/FunctionTool"}
    assert {"usage", "output", "status"} <= set(schemas["Response"]["properties"])
    assert "securitySchemes" not in doc["components"] and "security" not in op


def test_with_api_keys_every_v1_route_names_the_bearer_scheme(stateful):
    doc = _document(stateful)
    assert doc["components"]["securitySchemes"] == {"bearer": {"type": "http", "scheme": "bearer"}}
    for path, ops in doc["paths"].items():
        for op in ops.values():
            v1 = path.startswith("/v1/")
            assert ("security" in op) == v1 and ("401" in op["responses"]) == v1, path
    assert TestClient(stateful).get("/v1/models").status_code == 401  # the routes themselves aren't


def test_a_wrong_method_gets_405_with_every_method_of_its_path(stateful):
    r = TestClient(stateful).request(
        "PATCH", "/v1/conversations/conv_x", headers={"Authorization": f"Bearer {KEY}"}
    )
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"
    assert set(r.headers["allow"].split(", ")) >= {"GET", "POST", "DELETE"}
