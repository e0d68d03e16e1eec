"""The first screen's table for points with thinking on (a workload with `reasoning`): TTFT
beside the time to the first answer token, client (AIPerf's time_to_first_token and
time_to_first_output_token) and server (first token and first answer token after the request
arrived), with the reasoning and answer token counts. TTFT counts the first reasoning token; what
a user waits for is the answer."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from qualflow.report.first_screen import ordered_points

# (summary column, header): each TTFT beside its time to the first answer token
COLUMNS = (
    ("client_ttft_ms_p50", "TTFT p50 ms"),
    ("client_ttfot_ms_p50", "first answer token p50 ms"),
    ("client_ttft_ms_p99", "TTFT p99 ms"),
    ("client_ttfot_ms_p99", "first answer token p99 ms"),
    ("server_ttft_ms_p50", "server TTFT p50 ms"),
    ("server_ttfat_ms_p50", "server first answer token p50 ms"),
    ("server_reasoning_tokens_mean", "reasoning tokens (server)"),
    ("client_reasoning_tokens_mean", "reasoning tokens (AIPerf)"),
    ("server_answer_tokens_mean", "answer tokens (server)"),
)
NOTE = (
    "Client figures are AIPerf's: TTFT is its time_to_first_token (the first reasoning token), the "
    "first answer token its time_to_first_output_token (the first non-reasoning content). Server "
    "figures run from the request's arrival to the first token and to the first answer token. Mean "
    "over the point's repeats."
)


def _num(v) -> str:
    if v is None or not np.isfinite(v):
        return ""
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def _over_repeats(summ: pd.DataFrame, row: dict, column: str) -> float | None:
    """The mean of `column` over the repeats of `row`'s point (run ids <run id> and <run
    id>.r<k>)."""
    if column not in summ:
        return None
    rid = str(row["run_id"])
    mine = summ[
        (summ["point_id"] == row["point_id"])
        & (summ["model"] == row["model"])
        & (summ["profile"] == row["profile"])
        & ((summ["run_id"] == rid) | summ["run_id"].astype(str).str.startswith(rid + ".r"))
    ]
    v = pd.to_numeric(mine[column], errors="coerce").dropna()
    return float(v.mean()) if len(v) else None


def reasoning_points(summ: pd.DataFrame) -> pd.DataFrame:
    """Repeat-1 summary rows of the points whose requests sent `reasoning`, in load order."""
    if summ.empty or "reasoning_effort" not in summ:
        return summ.iloc[0:0]
    pts = ordered_points(summ)
    return pts[pts["reasoning_effort"].notna()]


def reasoning_html(ev: dict[str, pd.DataFrame]) -> str:
    """The table, or "" where no point has reasoning."""
    summ = ev["summary"]
    pts = reasoning_points(summ)
    if pts.empty:
        return ""
    rows = [
        "<h3>Reasoning: time to first token and to the first answer token</h3>"
        "<table class='t verdicts'><tr><th>model/profile/point</th><th>effort</th>"
        + "".join(f"<th>{html.escape(h)}</th>" for _, h in COLUMNS)
        + "</tr>"
    ]
    for r in pts.to_dict("records"):
        vals = [_over_repeats(summ, r, c) for c, _ in COLUMNS]
        name = html.escape(f"{r['model']}/{r['profile']}/{r['point_id']}")
        if all(v is None for v in vals):
            cells = (
                f"<td class='why' colspan='{len(COLUMNS)}'>"
                "no figures: no request of the point produced "
                "a token (see its verdict)</td>"
            )
        else:
            cells = "".join(f"<td>{_num(v)}</td>" for v in vals)
        rows.append(
            f"<tr><td>{name}</td><td>{html.escape(str(r['reasoning_effort']))}</td>{cells}</tr>"
        )
    rows.append(f"</table><p class='ci'>{html.escape(NOTE)}</p>")
    return "".join(rows)
