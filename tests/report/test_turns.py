"""The sessions table: TTFT by turn index, and the hit rate beside the trace's maximum."""

import pandas as pd

from qualflow.report.turns import ttft_by_turn, turns_html


def _requests():
    rows = []
    for point, turns in (("chat-multiturn_c2", 3), ("chat_c2", 1)):
        for turn in range(turns):
            for ttft in (10.0 * (turn + 1), 30.0 * (turn + 1)):
                rows.append(
                    {
                        "model": "m",
                        "profile": "fp16",
                        "point_id": point,
                        "phase": "profiling",
                        "turn_index": turn,
                        "client_ttft_ms": ttft,
                    }
                )
    rows.append({**rows[0], "phase": "warmup", "client_ttft_ms": 9999.0})
    return pd.DataFrame(rows)


def test_ttft_by_turn_covers_session_points_only():
    table = ttft_by_turn(_requests())
    assert list(table.index) == [("m", "fp16", "chat-multiturn_c2")]
    assert list(table.loc[("m", "fp16", "chat-multiturn_c2")]) == [20.0, 40.0, 60.0]


def test_the_table_puts_the_hit_rate_beside_its_maximum():
    summary = pd.DataFrame(
        [
            {
                "model": "m",
                "profile": "fp16",
                "point_id": "chat-multiturn_c2",
                "cache_hit_rate": 0.5,
                "aiperf_cache_hit_rate": 0.5,
                "max_cache_hit_rate": 0.625,
            }
        ]
    )
    page = turns_html({"requests": _requests(), "summary": summary})
    assert "turn 2" in page and "<td>60</td>" in page
    assert "<td>0.5</td>" in page and "<td>0.625</td>" in page
    assert turns_html({"requests": pd.DataFrame(), "summary": summary}) == ""


def test_the_table_shows_ttft_with_the_cache_on_beside_off():
    row = {"model": "m", "profile": "fp16", "point_id": "chat-multiturn_c2"}
    summary = pd.DataFrame(
        [{**row, "client_ttft_ms_p50": 21.5, "cache_off_client_ttft_ms_p50": 64.5}]
    )
    page = turns_html({"requests": _requests(), "summary": summary})
    on, off = page.index("TTFT p50 cache on ms"), page.index("TTFT p50 cache off ms")
    assert on < off and page.index("<td>21.5</td>") < page.index("<td>64.5</td>")
