"""One definition of a point's samples (qualflow.evidence.samples): an endpoint's client-only rows
give its summary and targets the latency figures AIPerf measured, its SLOs are judged on them, and
`summary` and `qualflow compare` take the same rows."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fixtures.sessions import POINT, build_joined, join, make_endpoint_session
from qualflow.evidence.compare.samples import samples_of
from qualflow.evidence.join import SERVER_FIGURE_NULL
from qualflow.evidence.schema import SERVER_METRICS, SUMMARY_PERCENTILES

AIPERF_TAGS = {
    "client_ttft_ms": "time_to_first_token",
    "client_itl_ms": "inter_token_latency",
    "client_request_latency_ms": "request_latency",
}


def test_endpoint_summary_holds_the_client_percentiles_aiperf_exported(tmp_path):
    s, adir = make_endpoint_session(tmp_path)
    _, ev = join(tmp_path, s)
    req = ev["requests"]
    assert (req[req["phase"] == "profiling"]["match_status"] == "client-only").all()
    row = ev["summary"].iloc[0]
    aiperf = json.loads((adir / "profile_export_aiperf.json").read_text())
    for col, tag in AIPERF_TAGS.items():
        assert row[f"{col}_mean"] == pytest.approx(aiperf[tag]["avg"]), col
        for q in SUMMARY_PERCENTILES:
            assert row[f"{col}_p{q}"] == pytest.approx(aiperf[tag][f"p{q}"]), (col, q)
    assert row["client_ttft_ms_p50"] == pytest.approx(44.0)
    # server-side figures stay null, with the reason recorded in runs and targets
    for m in SERVER_METRICS:
        assert row[f"{m}_p50"] is None or np.isnan(row[f"{m}_p50"]), m
    assert "server-side figures (public_task_call_wall_ms" in ev["runs"].iloc[0]["status_reasons"]
    t = ev["targets"].set_index("figure")
    assert t.loc["client_ttft_ms_p50", "mean"] == pytest.approx(44.0)
    assert t.loc["client_itl_ms_p99", "mean"] == pytest.approx(aiperf["inter_token_latency"]["p99"])
    assert t.loc["public_task_call_wall_ms_p50", "reason"] == SERVER_FIGURE_NULL
    assert t.loc["client_ttft_ms_p50", "reason"] is None


def test_endpoint_slos_are_judged_on_its_client_figures(tmp_path):
    s, _ = make_endpoint_session(tmp_path)
    res, ev = join(tmp_path, s, slos={"tiny_c2": {"ttft_ms": {"p50": 50}, "itl_ms": {"p99": 10}}})
    assert res["statuses"] == {"tiny_c2": "slo-met"}, ev["runs"].iloc[0]["status_reasons"]
    t = ev["targets"].set_index("figure")
    assert bool(t.loc["client_ttft_ms_p50", "met"]) and bool(t.loc["client_itl_ms_p99", "met"])


def test_endpoint_slo_miss_names_the_measured_client_figure(tmp_path):
    s, _ = make_endpoint_session(tmp_path / "a")
    res, ev = join(tmp_path / "a", s, slos={"tiny_c2": {"ttft_ms": {"p50": 40}}})
    assert res["statuses"] == {"tiny_c2": "aiperf-qualified"}
    assert (
        "SLO ttft_ms.p50 missed: client_ttft_ms_p50 <= 40 ms required, measured 44 ms"
        in ev["runs"].iloc[0]["status_reasons"]
    )
    # a bound on a server-side figure cannot be met without server timing, and says why
    s, _ = make_endpoint_session(tmp_path / "b")
    res, ev = join(tmp_path / "b", s, slos={"tiny_c2": {"task_call_wall_ms": {"p50": 1000}}})
    assert res["statuses"] == {"tiny_c2": "aiperf-qualified"}
    t = ev["targets"].set_index("figure").loc["public_task_call_wall_ms_p50"]
    assert not t["met"] and "not measured" in t["reason"] and SERVER_FIGURE_NULL in t["reason"]


@pytest.mark.parametrize("endpoint", [False, True])
def test_summary_and_compare_take_the_same_samples(tmp_path, endpoint):
    if endpoint:
        s, _ = make_endpoint_session(tmp_path)
        res, ev = join(tmp_path, s)
    else:
        res, ev = build_joined(tmp_path)
    row = ev["summary"].iloc[0]
    got = samples_of(ev, res["run_id"], POINT["point_id"])
    for col in AIPERF_TAGS:
        assert len(got[col]) == 3, col
        for q in SUMMARY_PERCENTILES:
            assert float(np.percentile(got[col], q)) == pytest.approx(row[f"{col}_p{q}"]), (col, q)
