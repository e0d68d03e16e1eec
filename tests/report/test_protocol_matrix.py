"""One renderer of the protocol-check matrix, for the run report (by stack) and the compare page
(base and head)."""

from __future__ import annotations

import pandas as pd

from qualflow.evidence.compare.protocol import (
    comparison_matrix,
    protocol_by_stack,
    protocol_pair,
    side_checks,
)
from qualflow.report.protocol_matrix import protocol_matrix_html

PROTO = pd.DataFrame(
    [
        {"run_id": "a1", "name": "non_stream_response", "passed": True, "detail": "ok"},
        {"run_id": "a1", "name": "request_id_echo", "passed": True, "detail": None},
        {"run_id": "a1", "name": "reject_<x>", "passed": True, "detail": None},
        {"run_id": "b1", "name": "non_stream_response", "passed": False, "detail": "streamed"},
        {"run_id": "b1", "name": "reject_<x>", "passed": True, "detail": None},
    ]
)
RUNS = pd.DataFrame(
    [
        {"run_id": "a1", "model": "m", "profile": "fp16", "stack": None},
        {"run_id": "b1", "model": "m", "profile": "tserve", "stack": "endpoint"},
    ]
)


def test_one_renderer_for_both_pages():
    pair = comparison_matrix(
        [protocol_pair("m/fp16", side_checks(PROTO, {"a1"}), side_checks(PROTO, {"b1"}))]
    )
    for mx, between in ((protocol_by_stack(PROTO, RUNS), "the stacks"), (pair, "the sides")):
        html = protocol_matrix_html(mx, between=between, empty="unused")
        assert html.startswith("<table class='t' id='protocol-matrix'><tr>")
        assert "<td class='reg'>FAIL</td>" in html and "<tr class='differs'>" in html
        assert "<tr class='same'>" in html and "<td>reject_&lt;x&gt;</td>" in html  # escaped
        assert html.endswith(f"<p>2 of 3 checks differ between {between}.</p>")


def test_no_checks_say_so():
    empty = protocol_by_stack(PROTO.iloc[:0], RUNS)
    assert (
        protocol_matrix_html(empty, between="the stacks", empty="No protocol checks ran.")
        == "<p>No protocol checks ran.</p>"
    )
    assert (
        protocol_matrix_html(
            comparison_matrix([]), between="the sides", empty="No protocol checks on either side."
        )
        == "<p>No protocol checks on either side.</p>"
    )
