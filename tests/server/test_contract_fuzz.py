"""The contract fuzz (short, seeded): schemathesis generates requests from the server's own
/openapi.json, valid ones and invalid ones, for every operation, and sends them to a real
`qualflow serve` (uvicorn, the synthetic engine on the embedded default's tokenizer, a response
store and an API key). Every answer must be in the document's shape (status code, content type,
headers, body schema), none a 5xx, none slower than the per-request timeout (a hang). The long run
is `schemathesis run` (docs/server.md)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from fixtures.server import ServerUnderTest

pytestmark = pytest.mark.timeout(300)

KEY = "sk-contract-fuzz-0123456789"
EXAMPLES = 8  # per operation and mode: about 250 requests in all
REQUEST_TIMEOUT_S = 30  # a request unanswered this long is a hang
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def srv(bundle_dir, tmp_path_factory):
    work = tmp_path_factory.mktemp("contract")
    (work / "keys").write_text(KEY + "\n")
    s = ServerUnderTest(
        bundle_dir,
        work,
        "--engine",
        "synthetic",
        "--step-ms",
        "1",
        "--max-batch",
        "4",
        "--store",
        str(work / "store.db"),
        "--api-key",
        f"file:{work / 'keys'}",
        model_name="m",
    ).start()
    yield s
    s.stop()


def _fuzz(operation, mode: GenerationMode, url: str) -> list[str]:
    """The failures of EXAMPLES seeded cases of `operation` in `mode`."""
    failures: list[str] = []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case):
        try:
            case.call_and_validate(
                base_url=url,
                headers={"Authorization": f"Bearer {KEY}"},
                checks=CHECKS,
                timeout=REQUEST_TIMEOUT_S,
            )
        except Exception as e:  # noqa: BLE001 - every kind of failure is reported, not raised
            failures.append(f"{operation.label} ({mode.value}): {type(e).__name__}: {e}")

    try:
        run()
    except Unsatisfiable:  # nothing of it can be made invalid (no parameters, no body)
        assert mode is GenerationMode.NEGATIVE, operation.label
    return failures


def test_every_answer_to_generated_requests_is_in_the_documents_shape(srv):
    schema = schemathesis.openapi.from_url(srv.url + "/openapi.json")
    operations = [r.ok() for r in schema.get_all_operations()]
    assert len(operations) >= 15  # the stateful server's routes, /openapi.json included
    failures = [
        f
        for op in operations
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
        for f in _fuzz(op, mode, srv.url)
    ]
    assert not failures, "\n\n".join(failures[:10])


@pytest.mark.parametrize("value", [str(2**63), str(-(2**63) - 1), "9" * 20, "\u00b2", "1\u0663"])
def test_an_integer_parameter_beyond_64_bits_is_a_400(value):
    """Found by the long fuzz: after=2**63 on the task timings was a 500 (OverflowError), and
    so was a digit that only Unicode calls one ('²', '٣': str.isdigit() takes them, int() not)."""
    from starlette.testclient import TestClient

    from qualflow.server.app import create_app

    client = TestClient(create_app(task=None, model_name="m"), raise_server_exceptions=False)
    for name in ("after", "since_ns", "limit"):
        r = client.get("/v1/qualflow/task-timings", params={name: value})
        assert r.status_code == 400, (name, r.text)
        assert r.json()["error"] == {
            "message": f"Invalid '{name}': expected a 64-bit integer.",
            "type": "invalid_request_error",
            "param": name,
            "code": "invalid_type",
        }


def test_a_cursor_at_the_64_bit_end_is_an_empty_page():
    """Found by the long fuzz: since_ns with after=2**63-1 was a 500 (bisect's OverflowError)."""
    from starlette.testclient import TestClient

    from qualflow.server.app import create_app

    client = TestClient(create_app(task=None, model_name="m"), raise_server_exceptions=False)
    params = {"after": str(2**63 - 1), "since_ns": str(-(2**63)), "limit": "1"}
    r = client.get("/v1/qualflow/task-timings", params=params)
    assert r.status_code == 200, r.text
    assert r.json()["data"] == [] and r.json()["has_more"] is False
