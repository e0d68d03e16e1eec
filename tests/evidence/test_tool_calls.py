"""The evidence of a point whose requests offered tools: per request, the function calls the server
recorded (timing record `tool_calls`); in the summary, the point's total; in the report's status
table, that count per point. Without tools (timing records without the field) they are null."""

from __future__ import annotations

import pandas as pd

from fixtures.sessions import build_joined, join, make_session
from qualflow.report.run_tables import status_table


def _profiling(req):
    return req[(req["phase"] == "profiling") & ~req["is_warmup"]].sort_values("request_id")


def test_each_request_and_the_point_count_the_calls(tmp_path):
    s, _ = make_session(tmp_path, tool_calls=(1, 0, 2))
    _, ev = join(tmp_path, s)
    assert list(_profiling(ev["requests"])["server_tool_calls"]) == [1, 0, 2]
    assert ev["summary"].iloc[0]["server_tool_calls"] == 3
    assert status_table(ev).iloc[0]["tool_calls"] == 3


def test_without_tools_the_counts_are_null(tmp_path):
    _, ev = build_joined(tmp_path)
    assert _profiling(ev["requests"])["server_tool_calls"].isna().all()
    assert pd.isna(ev["summary"].iloc[0]["server_tool_calls"])
    assert pd.isna(status_table(ev).iloc[0]["tool_calls"])
