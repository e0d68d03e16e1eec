"""The compare page's verdict box (significant changes, nothing testable, inconclusive deltas, or
no change) and its caveats: where noise was not measured, what could not be checked, where a
point's status changed."""

from __future__ import annotations

import html

import pandas as pd

from qualflow.evidence.compare.comparison import Comparison
from qualflow.evidence.compare.config import CompareOptions
from qualflow.evidence.compare.stats import INCONCLUSIVE, direction
from qualflow.report.compare_text import change, point_name


def m_floor(m: pd.DataFrame) -> str:
    """The default floor the verdicts name (from the first verdict that names one)."""
    named = [v for v in m["verdict"].astype(str) if "default floor of" in v] if len(m) else []
    return named[0].split("default floor of ", 1)[1] if named else "the default floor"


def verdict_box(m: pd.DataFrame, opts: CompareOptions) -> str:
    """The verdict box: significant changes, nothing testable, inconclusive deltas, or no change."""
    sig = m[m["significant"]] if len(m) else m
    if len(sig):
        items = "".join(
            f"<li class='{'reg' if direction(r['verdict']) == 'regression' else 'imp'}'>"
            f"{change(r)}, {html.escape(r['verdict'])})</li>"
            for r in sig.to_dict("records")
        )
        return (
            f"<div class='verdict bad' id='verdict'>{len(sig)}"
            " significant change(s) beyond run-to-run noise "
            f"(or, where it was not measured, beyond the default floor of {m_floor(m)}):"
            f"<ul>{items}</ul></div>"
        )
    if not len(m) or not m["tested"].any():
        return (
            "<div class='verdict bad' id='verdict'>"
            "Nothing could be tested: too few requests per side "
            "(a percentile needs >= 8 requests beyond it, p50 >"
            "= 16). The deltas below are not judged.</div>"
        )
    if (m["verdict"] == INCONCLUSIVE).any():
        inc = m[m["verdict"] == INCONCLUSIVE]
        items = "".join(f"<li>{change(r)})</li>" for r in inc.to_dict("records"))
        return (
            f"<div class='verdict inc' id='verdict'>Inconclusive: run-to-run noise not measured. "
            f"{len(inc)}"
            " delta(s) lie outside their within-run CI, but without run-to-run noise measured "
            "on both sides (or a configured floor) they cannot be told from it;"
            " none lies wholly beyond "
            f"the default floor of {opts.default_floor_pct}:<ul>{items}</ul></div>"
        )
    return (
        "<div class='verdict' id='verdict'>No significant change: every tested delta is within "
        "run-to-run noise.</div>"
    )


def caveats(cmp: Comparison) -> list[str]:
    """Where noise was not measured, what could not be checked, where the status changed."""
    pts, o = cmp.points, cmp.options
    parts = []
    unmeasured = pts[~pts["noise_measured"].astype(bool)] if len(pts) else pts
    if len(unmeasured):
        floor = (
            "the configured floor applies"
            if o.floor_configured
            else "no floor is configured, so no delta there can be significant"
        )
        parts.append(
            "<p id='noise-note'><b>Run-to-run noise not measured"
            f"</b> for {len(unmeasured)} of {len(pts)} "
            "point(s): a side needs >"
            "= 2 comparable runs (same version, dataset, workload, server settings "
            f"and status; repeats or re-qualifications in its history); {floor}"
            ". Qualify each version "
            "again (or run repeats), or pass --noise-rel / --noise-abs-ms. On a shared host, "
            "identical "
            "runs at different times can differ by far more than a within-run CI shows.</p>"
        )
    for n in cmp.notes:
        parts.append(f"<p class='note'><b>Not checked:</b> {html.escape(n)}</p>")
    st_changed = pts[pts["status_changed"]] if len(pts) else pts
    for r in st_changed.to_dict("records"):
        parts.append(
            f"<p class='reg'>Status changed at {point_name(r)}"
            f": {html.escape(str(r['base_status']))} "
            f"&rarr; {html.escape(str(r['head_status']))}</p>"
        )
    return parts
