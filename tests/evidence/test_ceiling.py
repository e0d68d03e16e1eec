"""The harness ceiling in the evidence: a point's ceiling run adds its figures and the stack's
share of it to the point's summary row, and its commands to runs.commands, but no request row, no
status and no SLO figure; a ceiling that failed says why and changes nothing else."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from fixtures.sessions import POINT, join, make_ceiling_session, make_session

CEILING_POINT = {**POINT, "harness_ceiling": True}


def test_the_share_of_the_ceiling_is_beside_the_stack_figures(tmp_path):
    s = make_ceiling_session(tmp_path, output_tps=160.0, itl=1.25)
    res, ev = join(
        tmp_path, s, points=(CEILING_POINT,), slos={"tiny_c2": {"min_output_tps": 100.0}}
    )
    row = ev["summary"].iloc[0]
    assert row["output_token_throughput_tps"] == 40.0
    assert row["ceiling_output_token_throughput_tps"] == 160.0 and row[
        "share_of_ceiling"
    ] == pytest.approx(0.25)
    assert row["ceiling_step_ms"] == 1.0 and row["ceiling_client_itl_ms_p50"] == pytest.approx(1.25)
    assert row["ceiling_reasons"] is None
    # the stack's own: its status (its SLO judged on its 40 tok/s, not the ceiling's 160), requests,
    # targets
    assert res["statuses"] == {"tiny_c2": "aiperf-qualified"}
    assert "SLO min_output_tps" in ev["runs"].iloc[0]["status_reasons"]
    assert len(ev["requests"][ev["requests"]["phase"] == "profiling"]) == 3
    assert ev["targets"].set_index("figure").loc["output_token_throughput_tps", "mean"] == 40.0
    commands = json.loads(ev["runs"].iloc[0]["commands"])
    assert commands["ceiling_aiperf"] == "aiperf profile --url ceiling tiny_c2"
    assert (
        commands["ceiling_server"][-1] == "synthetic"
        and commands["aiperf"] != commands["ceiling_aiperf"]
    )


def test_a_point_without_harness_ceiling_has_no_ceiling_columns(tmp_path):
    s = make_ceiling_session(tmp_path)
    _, ev = join(tmp_path, s, points=(POINT,))
    row = ev["summary"].iloc[0]
    assert (
        row[
            [
                "ceiling_step_ms",
                "ceiling_output_token_throughput_tps",
                "share_of_ceiling",
                "ceiling_reasons",
            ]
        ]
        .isna()
        .all()
    )
    assert "ceiling_aiperf" not in json.loads(ev["runs"].iloc[0]["commands"])


def test_an_invalid_ceiling_run_gives_no_share_and_says_why(tmp_path):
    s = make_ceiling_session(tmp_path, ok=False)
    res, ev = join(tmp_path, s, points=(CEILING_POINT,))
    row = ev["summary"].iloc[0]
    assert pd.isna(row["share_of_ceiling"]) and pd.isna(row["ceiling_output_token_throughput_tps"])
    assert row["ceiling_step_ms"] == 1.0
    assert row["ceiling_reasons"] == "ceiling run not valid: 2 requests failed"
    assert res["statuses"] == {"tiny_c2": "aiperf-qualified"}


def test_a_failed_ceiling_stage_is_named_and_the_stack_keeps_its_status(tmp_path):
    error = {"stage": "ceiling-startup", "type": "ServerCrashed", "message": "exited with code 1"}
    s = make_ceiling_session(tmp_path, points=(), error=error)
    res, ev = join(tmp_path, s, points=(CEILING_POINT,))
    assert ev["summary"].iloc[0]["ceiling_reasons"] == (
        "no harness ceiling run: it failed in ceiling-startup: ServerCrashed: exited with code 1"
    )
    assert res["statuses"] == {"tiny_c2": "aiperf-qualified"}
    assert "ceiling" not in ev["runs"].iloc[0]["status_reasons"]


def test_a_session_that_ended_before_the_ceiling_says_so(tmp_path):
    s, _ = make_session(tmp_path)
    _, ev = join(tmp_path, s, points=(CEILING_POINT,))
    assert (
        ev["summary"].iloc[0]["ceiling_reasons"]
        == "no harness ceiling run: the session ended before it"
    )
