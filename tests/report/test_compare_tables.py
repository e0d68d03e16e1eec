"""The compare page's headline figures per point, base -> head, in load order."""

from __future__ import annotations

import pandas as pd

from qualflow.report.compare_tables import headline_table
from qualflow.report.compare_text import load_order


def _row(point, label, stat, base, head, verdict):
    return {
        "model": "m",
        "profile": "fp16",
        "point_id": point,
        "label": label,
        "stat": stat,
        "base": base,
        "head": head,
        "rel_delta": (head - base) / base,
        "verdict": verdict,
    }


def test_headline_figures_in_load_order():
    m = pd.DataFrame(
        [
            _row("chat_c64", "TTFT", "p50", 100.0, 150.0, "regression"),
            _row("chat_c8", "TTFT", "p50", 50.0, 50.5, "within noise"),
            _row(
                "chat_c8",
                "output tokens/s (AIPerf aggregate)",
                "aggregate",
                2000.0,
                2100.0,
                "not tested (one value per run)",
            ),
            _row("chat_r0p5", "ITL", "p99", 10.0, 9.0, "improvement"),
        ]
    )
    html = headline_table(m)
    assert html.index("m/fp16/chat_c8") < html.index(
        "m/fp16/chat_c64"
    )  # by load, not alphabetically
    assert "<td class='reg' title='regression'>100.0 &rarr; 150.0 (+50.0%)</td>" in html
    assert "<td class='imp' title='improvement'>10 &rarr; 9 (-10.0%)</td>" in html
    assert "2000.0 &rarr; 2100.0 (+5.0%)" in html
    assert load_order("chat_r0p5") < load_order("chat_r2") and load_order("chat_c8") < load_order(
        "chat_c64"
    )
