"""The tool protocol checks (session.tool_checks): gated on /health's `tools` capability (an
endpoint on its config), passing against our server on the embedded default; and the conformance
rejection of function tools left out where the stack serves them (it runs where it does not)."""

from __future__ import annotations

import pytest

from fixtures.server import ServerUnderTest
from qualflow.session.conformance import Checker, run_protocol_checks
from qualflow.session.tool_checks import ToolSupport, tool_checks, tool_support

pytestmark = pytest.mark.timeout(600)
MODEL = "qualflow-tools"


@pytest.fixture(scope="module")
def srv(bundle_dir, tmp_path_factory):
    s = ServerUnderTest(bundle_dir, tmp_path_factory.mktemp("tc"), model_name=MODEL).start()
    yield s
    s.stop()


def test_the_checks_run_where_the_stack_serves_tools():
    endpoint = object()
    assert tool_support({"capabilities": ["text-generation"]}) is None
    assert tool_support({"capabilities": ["tools"]}) == ToolSupport()
    assert tool_support({"capabilities": ["tools"]}, endpoint, tools=False) is None
    assert tool_support({}, endpoint, tools=True) == ToolSupport()
    assert tool_checks(None) is None


def test_the_function_tools_rejection_runs_only_where_tools_are_not_served():
    served = {n for n, _ in Checker("http://x", "m", served=frozenset({"tools"})).checks()}
    plain = {n for n, _ in Checker("http://x", "m").checks()}
    assert "reject_function_tools" in plain and "reject_function_tools" not in served


def test_they_pass_against_our_server(srv):
    from qualflow.session.server_process import http_get_json

    _, health = http_get_json(srv.url + "/health")
    support = tool_support(health)
    assert support is not None
    rows = run_protocol_checks(
        srv.url, MODEL, more=tool_checks(support), served=frozenset(health["capabilities"])
    )
    by = {r["name"]: r for r in rows}
    assert "reject_function_tools" not in by
    assert {n for n in by if n.startswith("tools_")} == {
        "tools_required_call_validates",
        "tools_stream_call_events",
        "tools_function_call_output_round_trip",
        "tools_parallel_false_one_call",
        "tools_reject_unknown_function_choice",
        "tools_reject_non_object_schema",
        "tools_reject_unknown_call_id",
    }
    failed = [(r["name"], r["detail"]) for r in rows if not r["passed"]]
    assert not failed, failed
