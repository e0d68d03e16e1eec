"""The compare page's tables: every metric test side by side, the headline figures per point
(base -> head, in load order), the points as a reader wants them, and the full tables behind
<details>."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from qualflow.evidence.compare.comparison import Comparison
from qualflow.evidence.compare.stats import INCONCLUSIVE, direction
from qualflow.report.compare_text import fmt, load_order
from qualflow.report.markup import table_html


def wide_table(df: pd.DataFrame) -> str:
    return table_html(df, scroll=True)


def metrics_table(m: pd.DataFrame) -> str:
    if m.empty:
        return "<p><i>none</i></p>"
    rows = [
        "<table class='t'><tr><th>point</th><th>metric</th><th>stat</th><th>base</th><th>head</th>"
        "<th>delta</th><th>rel</th><th>BCa CI of delta (level)</th><th>noise floor</th><th>q (BH)"
        "</th><th>MW p</th>"
        "<th>n base/head</th><th>verdict</th></tr>"
    ]
    for r in m.to_dict("records"):
        cls = {"regression": "reg", "improvement": "imp"}.get(direction(r["verdict"]), "dim")
        ci = (
            f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}] ({r['ci_level']:.2%})"
            if np.isfinite(r["ci_low"]) and np.isfinite(r["ci_level"])
            else ""
        )
        if r["verdict"] == INCONCLUSIVE:
            cls = "inc"
        rows.append(
            f"<tr><td>{html.escape(r['model'])}/{html.escape(r['profile'])}"
            f"/{html.escape(str(r['point_id']))}</td>"
            f"<td>{html.escape(r['label'])} ({html.escape(r['unit'])})</td><td>{r['stat']}</td>"
            f"<td>{fmt(r['base'])}</td><td>{fmt(r['head'])}</td><td>{fmt(r['delta'])}</td>"
            f"<td>{fmt(r['rel_delta'], pct=True)}</td><td>{ci}</td><td>{fmt(r['noise_floor'])}"
            "</td>"
            f"<td>{fmt(r['q_value'])}</td><td>{fmt(r['mw_p'])}</td>"
            f"<td>{fmt(r['n_base'])}/{fmt(r['n_head'])}</td>"
            f"<td class='{cls}'>{html.escape(r['verdict'])}</td></tr>"
        )
    rows.append("</table>")
    return "\n".join(rows)


HEADLINE = (
    ("output tokens/s (AIPerf aggregate)", "aggregate"),
    ("TTFT", "p50"),
    ("TTFT", "p99"),
    ("ITL", "p50"),
    ("ITL", "p99"),
)


def headline_table(m: pd.DataFrame) -> str:
    """One row per point: throughput, TTFT and ITL p50/p99 as base -> head (relative delta),
    coloured by verdict."""
    if m.empty:
        return "<p><i>none</i></p>"
    keys = sorted(
        {(r["model"], r["profile"], r["point_id"]) for r in m.to_dict("records")},
        key=lambda k: (k[0], k[1], load_order(k[2])),
    )
    rows = [
        "<table class='t' id='headline'><tr><th>point</th>"
        + "".join(
            f"<th>{html.escape(label.split(' (')[0])} {stat}</th>" for label, stat in HEADLINE
        )
        + "</tr>"
    ]
    for k in keys:
        cells = []
        for label, stat in HEADLINE:
            hit = m[
                (m["model"] == k[0])
                & (m["profile"] == k[1])
                & (m["point_id"] == k[2])
                & (m["label"] == label)
                & (m["stat"] == stat)
            ]
            if hit.empty:
                cells.append("<td></td>")
                continue
            r = hit.iloc[0]
            cls = {"regression": "reg", "improvement": "imp"}.get(direction(r["verdict"]), "dim")
            cells.append(
                f"<td class='{cls}' title='{html.escape(str(r['verdict']), quote=True)}'>"
                f"{fmt(r['base'])} "
                f"&rarr; {fmt(r['head'])} ({fmt(r['rel_delta'], pct=True)})</td>"
            )
        rows.append(
            f"<tr><td>{html.escape(k[0])}/{html.escape(k[1])}/{html.escape(str(k[2]))}"
            f"</td>{''.join(cells)}</tr>"
        )
    return "\n".join(rows) + "</table>"


def points_view(pts: pd.DataFrame) -> pd.DataFrame:
    """The points table as a reader wants it: side by side, pass counts as n/m."""
    if not len(pts):
        return pts.copy()
    return pd.DataFrame(
        {
            "point": pts["model"] + "/" + pts["profile"] + "/" + pts["point_id"].astype(str),
            "base run": pts["base_run"],
            "head run": pts["head_run"],
            "status base": pts["base_status"],
            "status head": pts["head_status"],
            "correctness base": pts["base_correctness_passed"].astype(str)
            + "/"
            + pts["base_correctness_cases"].astype(str),
            "correctness head": pts["head_correctness_passed"].astype(str)
            + "/"
            + pts["head_correctness_cases"].astype(str),
            "protocol base": pts["base_protocol_passed"].astype(str)
            + "/"
            + pts["base_protocol_checks"].astype(str),
            "protocol head": pts["head_protocol_passed"].astype(str)
            + "/"
            + pts["head_protocol_checks"].astype(str),
            "requests base/head": pts["base_n"].astype(str) + "/" + pts["head_n"].astype(str),
            "comparable runs base/head": (pts["base_noise_runs"] + 1).astype(str)
            + "/"
            + (pts["head_noise_runs"] + 1).astype(str),
            "same dataset": pts["dataset_equal"],
            "same workload": pts["workload_equal"],
            "same server settings": pts["server_settings_equal"].map(
                lambda v: "unknown" if v is None or v != v else bool(v)
            ),
        }
    )


def full_tables(cmp: Comparison) -> list[str]:
    """Behind <details>: the points, every metric test, the identical provenance; then the points
    of one side only."""
    m, pv, prov = cmp.metrics, points_view(cmp.points), cmp.provenance
    same = prov[~prov["differs"]] if len(prov) else prov
    parts = [
        f"<details><summary>Points: status, correctness and protocol pass counts ({len(pv)})"
        "</summary>"
        f"{wide_table(pv)}</details>",
        f"<details><summary>Metrics side by side ({len(m)} tests)</summary>{metrics_table(m)}"
        "</details>",
        f"<details><summary>Identical provenance ({len(same)} fields)</summary>{wide_table(same)}"
        "</details>",
    ]
    if len(cmp.only_in):
        parts += ["<h2>Points in only one side (not compared)</h2>", wide_table(cmp.only_in)]
    return parts
