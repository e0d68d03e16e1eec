"""The report's first screen: where a point ran the harness ceiling, its verdict row shows the
ceiling's tok/s, the point's share of it and which side is the limit."""

from __future__ import annotations

import re

from fixtures.sessions import POINT, join, make_ceiling_session, make_session
from qualflow.report.first_screen import verdicts_html
from qualflow.report.page import load_evidence


def _verdicts(tmp_path) -> str:
    return verdicts_html(load_evidence([tmp_path / "ev"]))


def _cells(table: str, point: str) -> list[str]:
    row = next(r for r in table.split("<tr>") if point in r)
    return [re.sub(r"<[^>]+>", " ", c).split() for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]


def test_the_share_of_the_ceiling_and_the_limit_are_on_the_first_screen(tmp_path):
    s = make_ceiling_session(tmp_path, output_tps=160.0)
    join(tmp_path, s, points=({**POINT, "harness_ceiling": True},))
    table = _verdicts(tmp_path)
    assert "<th>harness ceiling tok/s</th><th>share of ceiling</th><th>limit</th>" in table
    cells = _cells(table, "tiny_c2")
    assert cells[4][-1] == "40" and cells[9] == ["160", "1", "ms", "steps"]
    assert cells[10][-1] == "25%" and cells[11][-1] == "stack"
    assert "the harness is the limit" in table


def test_a_point_at_its_ceiling_is_harness_limited(tmp_path):
    s = make_ceiling_session(tmp_path, output_tps=42.0)
    join(tmp_path, s, points=({**POINT, "harness_ceiling": True},))
    cells = _cells(_verdicts(tmp_path), "tiny_c2")
    assert cells[10][-1] == "95%" and cells[11][-1] == "harness"


def test_a_failed_ceiling_shows_why_and_no_ceiling_means_no_columns(tmp_path):
    s = make_ceiling_session(tmp_path, ok=False)
    join(tmp_path, s, points=({**POINT, "harness_ceiling": True},))
    assert "ceiling run not valid: 2 requests failed" in _verdicts(tmp_path)
    plain = tmp_path / "plain"
    plain.mkdir()
    s, _ = make_session(plain)
    join(plain, s)
    assert "share of ceiling" not in _verdicts(plain)
