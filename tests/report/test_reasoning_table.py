"""The report's first screen shows, for a point with thinking on, TTFT beside the time to the first
answer token (client and server) with the token counts; no such table without reasoning; a
reasoning point whose requests all failed says it has no figures."""

from __future__ import annotations

import re

from fixtures.sessions import POINT, build_joined, join, make_session
from qualflow.report.page import load_evidence, write_report
from qualflow.report.reasoning_table import reasoning_html

THINKING = (
    {"ttft": 20.0, "ttfot": 61.0, "reasoning": 9},
    {"ttft": 24.0, "ttfot": 75.0, "reasoning": 11},
    {"ttft": 31.0, "ttfot": 98.0, "reasoning": 14},
)
TITLE = "Reasoning: time to first token and to the first answer token"


def _cells(html: str, point: str) -> list[str]:
    row = re.search(
        rf"<tr><td>embedded/fp16/{point}</td><td>medium</td>(.*?)</tr>", html.split(TITLE, 1)[1]
    )
    assert row, html
    return re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))


def test_ttft_and_time_to_first_answer_token_side_by_side(tmp_path):
    s, _ = make_session(tmp_path, latencies=THINKING, reasoning_tokens=(8, 10, 12))
    join(tmp_path, s, points=({**POINT, "reasoning": {"effort": "medium"}},))
    write_report([tmp_path / "ev"], tmp_path / "rep")
    html = (tmp_path / "rep" / "report.html").read_text()
    assert (
        html.index("<h2>Verdicts</h2>") < html.index(TITLE) < html.index("Protocol checks by stack")
    )
    # TTFT p50 | first answer p50 | TTFT p99 | first answer p99 | server TTFT p50 | server first
    # answer p50 | reasoning tokens (server, AIPerf) | answer tokens (server)
    cells = _cells(html, "tiny_c2")
    assert cells[:2] == ["24", "75"] and cells[4:6] == ["12", "22"]
    assert cells[6:] == ["10", "11.3", "6"]
    assert "time_to_first_output_token" in html


def test_no_reasoning_table_without_reasoning(tmp_path):
    build_joined(tmp_path)
    assert reasoning_html(load_evidence([tmp_path / "ev"])) == ""


def test_a_reasoning_point_without_figures_says_so(tmp_path):
    s, adir = make_session(tmp_path)
    (s / "server_timing.jsonl").write_text("")  # nothing served: no sample carries a figure
    join(tmp_path, s, points=({**POINT, "reasoning": {"effort": "medium"}},))
    cells = _cells(reasoning_html(load_evidence([tmp_path / "ev"])), "tiny_c2")
    assert cells == ["no figures: no request of the point produced a token (see its verdict)"]
