"""The first screen's table for session points (requests with a turn index above 0: multi-turn
chat, replayed agent traces): TTFT p50 by turn index, and the prefix cache's hit rate beside the
trace's own maximum (what a perfect prefix cache could have held), and the point's TTFT p50 beside
its TTFT p50 with the cache off where the point was rerun without it."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

NOTE = (
    "TTFT p50 (AIPerf time_to_first_token, ms) over the point's profiling requests of each turn "
    "index, turn 0 first. Hit rate: prompt tokens served from the server's prefix cache over all "
    "prompt tokens (ours from the timing records, AIPerf's from usage); maximum: the share of each "
    "prompt that an earlier request had already sent, from the exact payloads. TTFT p50 cache "
    "on/off: the point's own, and the same requests run again in the same session against the "
    "server with --no-prefix-caching (workload cache_off_rerun; empty without one)."
)
CACHE = (
    ("cache_hit_rate", "hit rate"),
    ("aiperf_cache_hit_rate", "hit rate (AIPerf)"),
    ("max_cache_hit_rate", "trace maximum"),
    ("client_ttft_ms_p50", "TTFT p50 cache on ms"),
    ("cache_off_client_ttft_ms_p50", "TTFT p50 cache off ms"),
)


def ttft_by_turn(requests: pd.DataFrame) -> pd.DataFrame:
    """(model, profile, point_id) x turn_index -> TTFT p50, over profiling requests of the points
    that have sessions (some turn index above 0)."""
    need = {"turn_index", "client_ttft_ms", "point_id", "phase"}
    if requests.empty or not need <= set(requests):
        return pd.DataFrame()
    req = requests[(requests["phase"] == "profiling") & requests["turn_index"].notna()].copy()
    req["turn_index"] = pd.to_numeric(req["turn_index"]).astype(int)
    req["client_ttft_ms"] = pd.to_numeric(req["client_ttft_ms"], errors="coerce")
    keys = ["model", "profile", "point_id"]
    sessions = req.groupby(keys)["turn_index"].transform("max") > 0
    req = req[sessions]
    if req.empty:
        return pd.DataFrame()
    return req.pivot_table(
        index=keys, columns="turn_index", values="client_ttft_ms", aggfunc="median"
    )


def _num(v) -> str:
    if v is None or pd.isna(v) or not np.isfinite(v):
        return ""
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def _cache_cells(summ: pd.DataFrame, key: tuple) -> list:
    if summ.empty:
        return [None] * len(CACHE)
    mine = summ[
        (summ["model"] == key[0]) & (summ["profile"] == key[1]) & (summ["point_id"] == key[2])
    ]
    return [pd.to_numeric(mine[c], errors="coerce").mean() if c in mine else None for c, _ in CACHE]


def turns_html(ev: dict[str, pd.DataFrame]) -> str:
    """The table, or "" where no point has sessions."""
    table = ttft_by_turn(ev.get("requests", pd.DataFrame()))
    if table.empty:
        return ""
    turns = list(table.columns)
    rows = [
        "<h3>Sessions: TTFT by turn, and the prefix cache</h3>"
        "<table class='t verdicts'><tr><th>model/profile/point</th>"
        + "".join(f"<th>turn {t}</th>" for t in turns)
        + "".join(f"<th>{html.escape(h)}</th>" for _, h in CACHE)
        + "</tr>"
    ]
    for key, ttfts in table.iterrows():
        cells = [_num(v) for v in ttfts] + [_num(v) for v in _cache_cells(ev["summary"], key)]
        rows.append(
            f"<tr><td>{html.escape('/'.join(map(str, key)))}</td>"
            + "".join(f"<td>{c}</td>" for c in cells)
            + "</tr>"
        )
    rows.append(f"</table><p class='ci'>{html.escape(NOTE)}</p>")
    return "".join(rows)
