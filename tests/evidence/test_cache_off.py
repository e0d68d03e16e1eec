"""The cache-off rerun in the evidence: a point's rerun adds its TTFT p50 beside the point's own
and its commands to runs.commands, but no request row, no status and no SLO figure; a rerun that
failed says why and changes nothing else."""

from __future__ import annotations

import json

import pandas as pd

from fixtures.cache_off import make_cache_off_session
from fixtures.sessions import POINT, join

RERUN_POINT = {**POINT, "cache_off_rerun": True}
SLO = {"tiny_c2": {"ttft_ms": {"p50": 50.0}}}


def test_the_rerun_ttft_is_beside_the_point_and_not_its_own(tmp_path):
    s = make_cache_off_session(tmp_path)
    res, ev = join(tmp_path, s, points=(RERUN_POINT,), slos=SLO)
    row = ev["summary"].iloc[0]
    assert row["client_ttft_ms_p50"] == 20.0 and row["cache_off_client_ttft_ms_p50"] == 90.0
    assert pd.isna(row["cache_off_reasons"])
    # the point's own accounting and SLO: its 3 profiling requests at 20 ms (the rerun's 90 ms
    # would miss the SLO), no request row of the rerun
    assert res["statuses"] == {"tiny_c2": "slo-met"}
    assert len(ev["requests"][ev["requests"]["phase"] == "profiling"]) == 3
    slo = ev["targets"].set_index("figure").loc["client_ttft_ms_p50"]
    assert slo["mean"] == 20.0 and slo["met"]
    commands = json.loads(ev["runs"].iloc[0]["commands"])
    assert commands["cache_off_aiperf"] == "aiperf profile --url cache-off tiny_c2"
    assert commands["cache_off_server"][-1] == "--no-prefix-caching"


def test_a_point_without_the_rerun_has_no_cache_off_figure(tmp_path):
    s = make_cache_off_session(tmp_path)
    _, ev = join(tmp_path, s, points=(POINT,))
    row = ev["summary"].iloc[0]
    assert pd.isna(row["cache_off_client_ttft_ms_p50"]) and pd.isna(row["cache_off_reasons"])
    assert "cache_off_aiperf" not in json.loads(ev["runs"].iloc[0]["commands"])


def test_an_invalid_rerun_gives_no_figure_and_says_why(tmp_path):
    s = make_cache_off_session(tmp_path, ok=False)
    res, ev = join(tmp_path, s, points=(RERUN_POINT,), slos=SLO)
    row = ev["summary"].iloc[0]
    assert pd.isna(row["cache_off_client_ttft_ms_p50"])
    assert row["cache_off_reasons"] == "cache-off run not valid: 1 request failed"
    assert res["statuses"] == {"tiny_c2": "slo-met"}


def test_a_failed_rerun_stage_is_named_and_the_point_keeps_its_status(tmp_path):
    error = {"stage": "cache-off-startup", "type": "ServerCrashed", "message": "exited with 1"}
    s = make_cache_off_session(tmp_path, points=(), error=error)
    res, ev = join(tmp_path, s, points=(RERUN_POINT,), slos=SLO)
    assert ev["summary"].iloc[0]["cache_off_reasons"] == (
        "no cache-off rerun: it failed in cache-off-startup: ServerCrashed: exited with 1"
    )
    assert res["statuses"] == {"tiny_c2": "slo-met"}
    assert "cache-off" not in (ev["runs"].iloc[0]["status_reasons"] or "")


def test_a_session_that_ended_before_the_rerun_says_so(tmp_path):
    from fixtures.sessions import make_session

    s, _ = make_session(tmp_path)
    _, ev = join(tmp_path, s, points=(RERUN_POINT,))
    assert ev["summary"].iloc[0]["cache_off_reasons"] == (
        "no cache-off rerun: the session ended before it"
    )
