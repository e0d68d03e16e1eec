"""Client-side accounting of an endpoint: every stream's terminal event from AIPerf's raw export
(AIPerf 0.13 counts a failed or cut-off stream as a success), and the status ladder without server
timing."""

from __future__ import annotations

import json

from qualflow.aiperf.terminal import read_terminals, terminal_of
from qualflow.evidence.status import accounting_ok


def _sse(*events):
    return {
        "metadata": {"x_request_id": "r"},
        "responses": [
            {"perf_ns": i, "packets": [{"name": "data", "value": json.dumps(e)}]}
            for i, e in enumerate(events)
        ],
    }


DELTA = {"type": "response.output_text.delta", "delta": "x"}


def test_streams_need_a_good_terminal_event():
    assert (
        terminal_of(
            _sse(DELTA, {"type": "response.completed", "response": {"status": "completed"}})
        ).error
        is None
    )
    cut = {
        "type": "response.incomplete",
        "response": {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
    }
    assert terminal_of(_sse(DELTA, cut)).error is None
    t = terminal_of(_sse(DELTA, DELTA))
    assert t.event == "response.output_text.delta" and "without a terminal event" in t.error
    t = terminal_of(
        _sse(
            DELTA,
            {"type": "response.failed", "response": {"status": "failed", "error": {"code": "x"}}},
        )
    )
    assert t.event == "response.failed" and "response failed" in t.error
    other = {
        "type": "response.incomplete",
        "response": {"status": "incomplete", "incomplete_details": {"reason": "content_filter"}},
    }
    assert "content_filter" in terminal_of(_sse(DELTA, other)).error
    # an `event:` line names the type where the data does not
    rec = {
        "responses": [
            {
                "packets": [
                    {"name": "event", "value": "response.completed"},
                    {"name": "data", "value": json.dumps({"response": {"status": "completed"}})},
                ]
            }
        ]
    }
    assert terminal_of(rec).error is None


def test_non_streamed_bodies_and_error_records():
    ok = {
        "responses": [
            {
                "perf_ns": 1,
                "content_type": "application/json",
                "text": json.dumps({"status": "completed"}),
            }
        ]
    }
    assert terminal_of(ok) == terminal_of(ok) and terminal_of(ok).error is None
    bad = {"responses": [{"perf_ns": 1, "text": json.dumps({"status": "failed"})}]}
    assert terminal_of(bad).error
    assert (
        terminal_of({"responses": [], "error": {"code": 500}}).error is None
    )  # AIPerf already counts it


def test_read_terminals_by_request_id(tmp_path):
    assert read_terminals(tmp_path) is None  # no raw export: not checked
    recs = [
        dict(_sse(DELTA), metadata={"x_request_id": "a"}),
        dict(
            _sse(DELTA, {"type": "response.completed", "response": {}}),
            metadata={"x_request_id": "b"},
        ),
    ]
    (tmp_path / "profile_export_raw.jsonl").write_text(
        "\n".join(json.dumps(r) for r in recs) + "\n{trunc"
    )
    t = read_terminals(tmp_path)
    assert set(t) == {"a", "b"} and t["a"].error and t["b"].error is None


def test_accounting_without_server_timing():
    s = {
        "request_count": 4,
        "n_client": 4,
        "n_server": 0,
        "n_matched": 0,
        "n_client_only": 4,
        "n_server_only": 0,
        "duplicate_request_ids": None,
        "n_server_osl_mismatch": 0,
        "n_errors": 0,
    }
    assert accounting_ok(s, server_timing=False) == (True, [])
    assert not accounting_ok(s)[0]  # with server timing, client-only fails
    ok, why = accounting_ok({**s, "n_client": 3, "n_errors": 1}, server_timing=False)
    assert (
        not ok and "AIPerf records 3, expected 4" in why[0] and "1 requests with errors" in why[1]
    )
