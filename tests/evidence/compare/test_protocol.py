"""The protocol-check matrix: one builder for the run report (a column per stack) and for a
comparison (base and head of each pair, with what each saw)."""

from __future__ import annotations

import pandas as pd

from qualflow.evidence.compare.protocol import (
    comparison_matrix,
    protocol_by_stack,
    protocol_pair,
    side_checks,
)

PROTO = pd.DataFrame(
    [
        {"run_id": "a1", "name": "non_stream_response", "passed": True, "detail": "ok"},
        {
            "run_id": "a2",
            "name": "non_stream_response",
            "passed": True,
            "detail": "ok",
        },  # stack a's second run
        {"run_id": "a1", "name": "request_id_echo", "passed": True, "detail": None},
        {
            "run_id": "b1",
            "name": "non_stream_response",
            "passed": False,
            "detail": "streamed\nsecond line",
        },
    ]
)
RUNS = pd.DataFrame(
    [
        {"run_id": "a1", "model": "m", "profile": "fp16", "stack": None},
        {"run_id": "a2", "model": "m", "profile": "fp16", "stack": None},
        {"run_id": "b1", "model": "m", "profile": "tserve", "stack": "endpoint"},
    ]
)


def _pair():
    return comparison_matrix(
        [protocol_pair("m/fp16", side_checks(PROTO, {"a1"}), side_checks(PROTO, {"b1"}))]
    )


def test_by_stack_one_column_per_stack_with_its_runs_together():
    mx = protocol_by_stack(PROTO, RUNS)
    assert mx.sides == ("m/fp16 (qualflow)", "m/tserve (endpoint)")
    t = mx.table.set_index("check")
    assert list(t.index) == ["non_stream_response", "request_id_echo"]
    assert t.loc["non_stream_response", "m/fp16 (qualflow)"] == "pass"
    assert t.loc["non_stream_response", "m/tserve (endpoint)"] == "FAIL"
    assert t.loc["request_id_echo", "m/tserve (endpoint)"] == "not run"
    assert mx.differences() == [
        "non_stream_response: m/fp16 (qualflow) pass, m/tserve (endpoint) FAIL",
        "request_id_echo: m/fp16 (qualflow) pass, m/tserve (endpoint) not run",
    ]


def test_a_stack_that_ran_no_check_has_no_column():
    runs = pd.concat(
        [RUNS, pd.DataFrame([{"run_id": "c1", "model": "m", "profile": "bf16", "stack": None}])]
    )
    assert protocol_by_stack(PROTO, runs).sides == ("m/fp16 (qualflow)", "m/tserve (endpoint)")


def test_pair_shows_what_each_side_saw():
    mx = _pair()
    assert mx.sides == ("base", "head")
    r = mx.table.set_index("check").loc["non_stream_response"]
    assert (r["pair"], r["base"], r["head"], r["base saw"], r["head saw"]) == (
        "m/fp16",
        "pass",
        "FAIL",
        "ok",
        "streamed",
    )
    assert mx.differences() == [
        "non_stream_response: base pass, head FAIL",
        "request_id_echo: base pass, head not run",
    ]
