"""The report's first screen, for a reader with one minute: one verdict per model/profile/point
(rung reached, SLO misses), the headline figures with their CI over repeats, and where a workload
ran the harness ceiling, the point's share of it and which side is the limit; the highest load
meeting the SLO per workload; the SLO table. Points are ordered by load. The figures beside them
are drawn by report.first_screen_plots."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from qualflow.evidence.schema import STATUS_LADDER
from qualflow.evidence.slo import max_load_meeting

CSS = (
    ".verdicts td,.verdicts th{text-align:right}"
    ".verdicts td:first-child,.verdicts td.why{text-align:left}"
    ".rung{font-weight:bold;padding:1px 6px;border-radius:3px}.rung.top{background:#d6f0d6;"
    "color:#1b5e20}"
    ".rung.low{background:#fdecea;color:#b00020}td.why{max-width:460px;font-size:11px}"
    ".ci{color:#777;font-size:11px}.limit-harness{color:#b00020;font-weight:bold}"
)
HEAD = (
    ("output_token_throughput_tps", "output tok/s"),
    ("client_ttft_ms_p50", "TTFT p50 ms"),
    ("client_ttft_ms_p99", "TTFT p99 ms"),
    ("client_itl_ms_p50", "ITL p50 ms"),
    ("client_itl_ms_p99", "ITL p99 ms"),
)


def load_of(summary: pd.DataFrame) -> pd.Series:
    """A point's load: its concurrency, or its request rate at open-loop points."""
    rate = (
        pd.to_numeric(summary.get("request_rate"), errors="coerce")
        if "request_rate" in summary
        else None
    )
    conc = pd.to_numeric(summary["concurrency"], errors="coerce")
    return conc if rate is None else rate.where(rate.notna(), conc)


def ordered_points(summary: pd.DataFrame) -> pd.DataFrame:
    """Repeat-1 summary rows, ordered by model, profile, workload, load kind and load (not by
    name)."""
    if summary.empty:
        return summary
    s = (
        summary[pd.to_numeric(summary.get("repeat", 1), errors="coerce").fillna(1).astype(int) == 1]
        if "repeat" in summary
        else summary
    )
    kind = (
        s["load_kind"].fillna("concurrency")
        if "load_kind" in s
        else pd.Series("concurrency", index=s.index)
    )
    wl = s["workload"].fillna(s["point_id"]) if "workload" in s else s["point_id"]
    s = s.assign(_load=load_of(s), _kind=kind, _wl=wl)
    return s.sort_values(["model", "profile", "_wl", "_kind", "_load"], na_position="last")


def point_figure(targets: pd.DataFrame, run_id, point_id, figure, fallback):
    """One figure of a point over its repeats: (mean, CI low, CI high, repeats) from the targets
    table, or (`fallback`, None, None, None) where the table has no row for it."""
    t = (
        targets[
            (targets["run_id"] == run_id)
            & (targets["point_id"] == point_id)
            & (targets["figure"] == figure)
        ]
        if not targets.empty
        else targets
    )
    if t.empty:
        return (fallback, None, None, None)
    r = t.iloc[0]
    return r["mean"], r["ci_low"], r["ci_high"], int(r["n_repeats"])


def _num(v) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return ""
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


# a point at or above this share of its harness ceiling is limited by the serving path or AIPerf
HARNESS_LIMIT_SHARE = 0.9
CEILING_HEAD = "<th>harness ceiling tok/s</th><th>share of ceiling</th><th>limit</th>"
CEILING_NOTE = (
    "<p class='ci'>"
    "Harness ceiling: the same AIPerf point against our server on the synthetic engine "
    "(no model, one token per running request every step; step in ms beside the figure): the most "
    "the HTTP path and AIPerf give on this machine. Share of ceiling = the point's output tok/s "
    "over "
    f"it; at {HARNESS_LIMIT_SHARE:.0%} or more the harness is the limit, below it the stack is. "
    "Never part of the rung or the SLOs.</p>"
)


def _has_ceiling(summ: pd.DataFrame) -> bool:
    return any(c in summ and summ[c].notna().any() for c in ("ceiling_step_ms", "ceiling_reasons"))


def _ceiling_cells(r: dict, output_tps) -> str:
    """The point's harness-ceiling cells: the ceiling's tok/s (and step), the share of it of
    `output_tps` (the point's output tok/s as shown: the mean over its repeats), the limit."""
    tps = r.get("ceiling_output_token_throughput_tps")
    if pd.isna(tps):
        why = r.get("ceiling_reasons")
        return (
            f"<td class='why' colspan='3'>{html.escape(why) if isinstance(why, str) else ''}</td>"
        )
    cell = (
        f"<td>{_num(tps)}<br><span class='ci'>{_num(r.get('ceiling_step_ms'))} ms steps</span></td>"
    )
    if output_tps is None or pd.isna(output_tps):
        return cell + "<td></td><td></td>"
    share = output_tps / tps
    limit = (
        "<span class='limit-harness'>harness</span>" if share >= HARNESS_LIMIT_SHARE else "stack"
    )
    return cell + f"<td>{share:.0%}</td><td>{limit}</td>"


def verdicts_html(ev: dict[str, pd.DataFrame]) -> str:
    summ, runs = ev["summary"], ev["runs"]
    targets = ev.get("targets", pd.DataFrame())
    if summ.empty:
        return "<p><i>no workload points</i></p>"
    st = runs.set_index(["run_id", "point_id"]) if not runs.empty else None
    ceiling = _has_ceiling(summ)
    rows = [
        "<table class='t verdicts'><tr><th>model/profile/point</th><th>load</th><th>repeats</th>"
        "<th>rung reached</th>"
        + "".join(f"<th>{h}</th>" for _, h in HEAD)
        + (CEILING_HEAD if ceiling else "")
        + "<th>why not further (SLO misses first)</th></tr>"
    ]
    for r in ordered_points(summ).to_dict("records"):
        x = (
            st.loc[(r["run_id"], r["point_id"])]
            if st is not None and (r["run_id"], r["point_id"]) in st.index
            else {}
        )
        status = x.get("status", r.get("status")) if len(x) else r.get("status")
        why = str(x.get("status_reasons") or "") if len(x) else ""
        parts = sorted(why.split("; "), key=lambda w: not w.startswith("SLO")) if why else []
        cls = "top" if status == STATUS_LADDER[-1] else "low"
        kind = r.get("load_kind") or "concurrency"
        load = f"{'c' if kind == 'concurrency' else 'rate '}{_num(r['_load'])}" + (
            "/s" if kind != "concurrency" else ""
        )
        cells, shown = [], {}
        for col, _ in HEAD:
            m, lo, hi, n = point_figure(targets, r["run_id"], r["point_id"], col, r.get(col))
            shown[col] = m
            ci = (
                f"<br><span class='ci'>[{_num(lo)}, {_num(hi)}]</span>"
                if lo is not None and pd.notna(lo)
                else ""
            )
            cells.append(f"<td>{_num(m)}{ci}</td>")
        name = html.escape(f"{r['model']}/{r['profile']}/{r['point_id']}")
        rows.append(
            f"<tr><td>{name}</td><td>{load}</td>"
            f"<td>{int(r.get('repeats') or 1)}</td><td><span class='rung {cls}'>"
            f"{html.escape(str(status))}</span></td>"
            + "".join(cells)
            + (_ceiling_cells(r, shown[HEAD[0][0]]) if ceiling else "")
            + f"<td class='why'>{'<br>'.join(html.escape(p) for p in parts)}</td></tr>"
        )
    rows.append(
        "</table><p class='ci'>Figures: mean over the point's repeats;"
        " [brackets]: 95% Student-t CI "
        "across repeats (shown with two or more repeats).</p>" + (CEILING_NOTE if ceiling else "")
    )
    return "".join(rows)


def max_load_html(ev: dict[str, pd.DataFrame]) -> str:
    ml = max_load_meeting(ev["runs"], ev["summary"], STATUS_LADDER[-1])
    if ml.empty:
        return ""
    rows = [
        "<table class='t'><tr><th>model/profile</th><th>workload</th><th>load</th>"
        "<th>max load meeting the SLO</th>"
        "<th>lowest load missing it</th><th>loads measured</th></tr>"
    ]
    for r in ml.to_dict("records"):
        kind = "concurrency" if r["load_kind"] == "concurrency" else "request rate (req/s)"
        rows.append(
            f"<tr><td>{html.escape(r['model'])}/{html.escape(r['profile'])}</td>"
            f"<td>{html.escape(str(r['workload']))}</td>"
            f"<td>{kind}</td><td><b>{_num(r['max_load_meeting_slo']) or 'none'}</b></td>"
            f"<td>{_num(r['first_load_missing'])}</td><td>{html.escape(r['loads'])}</td></tr>"
        )
    return "<h3>Max load meeting the SLO</h3>" + "".join(rows) + "</table>"


def slo_table(ev: dict[str, pd.DataFrame]) -> pd.DataFrame:
    t = ev.get("targets", pd.DataFrame())
    if t.empty:
        return t
    t = t[t["bound"].notna()]
    return t[
        [
            "point_id",
            "slo",
            "op",
            "bound",
            "mean",
            "ci_low",
            "ci_high",
            "n_repeats",
            "met",
            "marginal",
        ]
    ]
