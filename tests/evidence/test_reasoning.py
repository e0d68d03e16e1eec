"""The evidence of a point with thinking on: per request, the server's reasoning and answer token
counts and time to the first answer token beside AIPerf's reasoning token count and time to first
output token; in the summary, those figures (AIPerf's equal to its own summary export). Timing logs
written before thinking existed still join, their thinking columns null; a reasoning point whose
every request was refused (a server without thinking answers 400) joins with its figures null."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fixtures.sessions import POINT, build_joined, join, make_session
from qualflow.evidence.schema import REASONING_METRICS, SUMMARY_PERCENTILES

# AIPerf's figures of each profiling record (ms, tokens) and the server's reasoning tokens of each
THINKING = (
    {"ttft": 20.0, "ttfot": 61.0, "reasoning": 9},
    {"ttft": 24.0, "ttfot": 75.0, "reasoning": 11},
    {"ttft": 31.0, "ttfot": 98.0, "reasoning": 14},
)
SERVER_REASONING = (8, 10, 12)
REASONING_POINT = {**POINT, "reasoning": {"effort": "medium"}}
AIPERF_TAGS = {
    "client_ttfot_ms": "time_to_first_output_token",
    "client_reasoning_tokens": "reasoning_token_count",
}


def _profiling(req):
    return req[(req["phase"] == "profiling") & ~req["is_warmup"]].sort_values("request_id")


def test_each_request_has_both_sides_reasoning_figures(tmp_path):
    s, _ = make_session(tmp_path, latencies=THINKING, reasoning_tokens=SERVER_REASONING)
    _, ev = join(tmp_path, s, points=(REASONING_POINT,))
    prof = _profiling(ev["requests"])
    assert list(prof["client_ttfot_ms"]) == [61.0, 75.0, 98.0]
    assert list(prof["client_reasoning_tokens"]) == [9, 11, 14]
    assert list(prof["server_reasoning_tokens"]) == [8, 10, 12]
    assert list(prof["server_answer_tokens"]) == [8, 6, 4]  # 16 output tokens each
    # the fixture's first token comes 12 ms after arrival, the answer one ms per reasoning token
    # later
    assert list(prof["server_ttft_ms"]) == pytest.approx([12.0] * 3)
    assert list(prof["server_ttfat_ms"]) == pytest.approx([20.0, 22.0, 24.0])
    first = prof["server_answer_first_token_ns"] - prof["server_http_received_ns"]
    assert list(first) == pytest.approx([20e6, 22e6, 24e6])


def test_the_summary_holds_aiperfs_reasoning_metrics_and_the_servers(tmp_path):
    s, adir = make_session(tmp_path, latencies=THINKING, reasoning_tokens=SERVER_REASONING)
    _, ev = join(tmp_path, s, points=(REASONING_POINT,))
    row = ev["summary"].iloc[0]
    assert row["reasoning_effort"] == "medium"
    aiperf = json.loads((adir / "profile_export_aiperf.json").read_text())
    for col, tag in AIPERF_TAGS.items():
        assert row[f"{col}_mean"] == pytest.approx(aiperf[tag]["avg"]), col
        for q in SUMMARY_PERCENTILES:
            assert row[f"{col}_p{q}"] == pytest.approx(aiperf[tag][f"p{q}"]), (col, q)
    assert row["server_reasoning_tokens_mean"] == pytest.approx(10.0)
    assert row["server_answer_tokens_p50"] == pytest.approx(6.0)
    assert row["server_ttfat_ms_p50"] == pytest.approx(22.0) and row[
        "server_ttft_ms_p50"
    ] == pytest.approx(12.0)
    assert row["client_ttft_ms_p50"] == pytest.approx(24.0) and row[
        "client_ttfot_ms_p50"
    ] == pytest.approx(75.0)


def test_a_timing_log_from_before_thinking_still_joins(tmp_path):
    """The default fixture: no reasoning on either side, timing records without the new fields."""
    _, ev = build_joined(tmp_path)
    prof = _profiling(ev["requests"])
    assert len(prof) == 3 and (prof["match_status"] == "matched").all()
    for c in (
        "client_reasoning_tokens",
        "server_reasoning_tokens",
        "server_answer_tokens",
        "server_answer_first_token_ns",
        "server_ttfat_ms",
    ):
        assert prof[c].dtype == float and prof[c].isna().all(), c
    assert list(prof["client_ttfot_ms"]) == list(
        prof["client_ttft_ms"]
    )  # AIPerf: TTFO is TTFT here
    row = ev["summary"].iloc[0]
    assert row["reasoning_effort"] is None and row["server_ttft_ms_p50"] == pytest.approx(12.0)
    for m in ("client_reasoning_tokens", "server_reasoning_tokens", "server_ttfat_ms"):
        assert row[f"{m}_p50"] is None or np.isnan(row[f"{m}_p50"]), m
    assert set(REASONING_METRICS) <= {c.rsplit("_", 1)[0] for c in ev["summary"].columns}


def refused_everything(tmp_path):
    """The session of a reasoning point against a server without thinking: every request answered
    400 (AIPerf then writes no summary and no ready marker, and exits 1)."""
    s, adir = make_session(tmp_path)
    recs = []
    for r in map(json.loads, (adir / "profile_export.jsonl").read_text().splitlines()):
        r["metrics"] = {"error_isl": {"value": 32, "unit": "tokens"}}
        r["error"] = {"code": 400, "type": "Bad Request", "message": "reasoning: not supported"}
        recs.append(r)
    (adir / "profile_export.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (adir / "profile_export_aiperf.json").unlink()
    (adir / ".aiperf_results_ready.json").unlink()
    timing = s / "server_timing.jsonl"
    out = []
    for r in map(json.loads, timing.read_text().splitlines()):
        if r["tag"].startswith("aiperf:"):
            r = {k: v for k, v in r.items() if not k.endswith("_ns") or k == "http_received_ns"}
            r.update(
                status="rejected",
                http_status=400,
                error="reasoning: not supported",
                finish_reason=None,
                output_tokens=None,
                http_sent_ns=r["http_received_ns"] + 1_000_000,
            )
        out.append(r)
    timing.write_text("".join(json.dumps(r) + "\n" for r in out))
    (s / "points" / "tiny_c2" / "run.json").write_text(
        json.dumps(
            {
                "command": "aiperf profile ...",
                "verdict": {"ok": False, "reasons": ["3 error records"], "warnings": []},
            }
        )
    )
    return s


def test_a_reasoning_point_refused_with_400s_joins_with_null_figures(tmp_path):
    s = refused_everything(tmp_path)
    res, ev = join(tmp_path, s, points=(REASONING_POINT,))
    assert res["statuses"] == {"tiny_c2": "protocol-conformant"}
    prof = _profiling(ev["requests"])
    assert (prof["server_http_status"] == 400).all() and prof["client_error"].notna().all()
    row = ev["summary"].iloc[0]
    assert row["reasoning_effort"] == "medium" and row["n_errors"] == 3
    for m in REASONING_METRICS:
        assert row[f"{m}_mean"] is None or np.isnan(row[f"{m}_mean"]), m
