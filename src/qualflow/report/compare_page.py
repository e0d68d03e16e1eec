"""The compare page: a self-contained HTML page (plots embedded as base64; the PNGs also lie
beside it for Snakemake's --report) over a `Comparison`, a list of sections that answers first:
one table per point (report.compare_first) and the verdict, then the protocol matrix, then the
plots; the method, the noise discussion and the full tables after, collapsible. Sides are named
by their config names and pinned identities (evidence.compare.names), never by the paths they
were given as."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from qualflow.evidence.compare.comparison import Comparison
from qualflow.evidence.compare.config import CompareOptions
from qualflow.evidence.compare.method import method_text
from qualflow.evidence.compare.stats import INCONCLUSIVE, direction
from qualflow.report import compare_first, protocol_matrix
from qualflow.report.compare_plots import cdf_plot, delta_plot
from qualflow.report.markup import img_tag, table_html

CSS = (
    "body{font-family:sans-serif;max-width:1250px;margin:1.5em auto;font-size:14px;color:#222}"
    "table.t{border-collapse:collapse;font-size:12px;margin:.4em 0}"
    "table.t td,table.t th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    "table.t th{background:#f3f3f3}table.t td:first-child{text-align:left}"
    ".banner{background:#b00020;color:#fff;padding:.8em 1em;font-weight:bold;border-radius:4px}"
    ".verdict{font-size:16px;padding:.6em 1em;border-radius:4px;background:#eef5ee;"
    "border:1px solid #9c9}"
    ".verdict.bad{background:#fdecea;border-color:#e99}"
    ".verdict.inc{background:#fff8e1;border-color:#e0c060}.inc{color:#8a6d00;font-weight:bold}"
    ".reg{color:#b00020;font-weight:bold}.imp{color:#1b7f2a;font-weight:bold}.dim{color:#888}"
    "img{max-width:100%;border:1px solid #eee}details{margin:.5em 0}code{background:#f5f5f5}"
    "details>summary{cursor:pointer;font-weight:bold}" + protocol_matrix.CSS + compare_first.CSS
)


def _fmt(v, pct=False):
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return ""
    if pct:
        return f"{v:+.1%}"
    if isinstance(v, (float, np.floating)):
        return f"{v:.3g}" if abs(v) < 100 else f"{v:.1f}"
    return html.escape(str(v))


def _table(df: pd.DataFrame) -> str:
    return table_html(df, scroll=True)


def _metrics_table(m: pd.DataFrame) -> str:
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
            f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}] ({r['ci_level']:.2%})"
            if np.isfinite(r["ci_low"]) and np.isfinite(r["ci_level"])
            else ""
        )
        if r["verdict"] == INCONCLUSIVE:
            cls = "inc"
        rows.append(
            f"<tr><td>{html.escape(r['model'])}/{html.escape(r['profile'])}"
            f"/{html.escape(str(r['point_id']))}</td>"
            f"<td>{html.escape(r['label'])} ({html.escape(r['unit'])})</td><td>{r['stat']}</td>"
            f"<td>{_fmt(r['base'])}</td><td>{_fmt(r['head'])}</td><td>{_fmt(r['delta'])}</td>"
            f"<td>{_fmt(r['rel_delta'], pct=True)}</td><td>{ci}</td><td>{_fmt(r['noise_floor'])}"
            "</td>"
            f"<td>{_fmt(r['q_value'])}</td><td>{_fmt(r['mw_p'])}</td>"
            f"<td>{_fmt(r['n_base'])}/{_fmt(r['n_head'])}</td>"
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


def _load_order(point_id: str) -> tuple:
    """Points ordered by load: concurrency or rate, read from the point id's `_c<N>` / `_r<N>`
    suffix."""
    import re

    m = re.search(r"_([cr])(\d+(?:p\d+)?)", str(point_id))
    return (
        str(point_id).split("_")[0],
        m.group(1) if m else "",
        float(m.group(2).replace("p", ".")) if m else 0.0,
    )


def _headline_table(m: pd.DataFrame) -> str:
    """One row per point: throughput, TTFT and ITL p50/p99 as base -> head (relative delta),
    coloured by verdict."""
    if m.empty:
        return "<p><i>none</i></p>"
    keys = sorted(
        {(r["model"], r["profile"], r["point_id"]) for r in m.to_dict("records")},
        key=lambda k: (k[0], k[1], _load_order(k[2])),
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
                f"{_fmt(r['base'])} "
                f"&rarr; {_fmt(r['head'])} ({_fmt(r['rel_delta'], pct=True)})</td>"
            )
        rows.append(
            f"<tr><td>{html.escape(k[0])}/{html.escape(k[1])}/{html.escape(str(k[2]))}"
            f"</td>{''.join(cells)}</tr>"
        )
    return "\n".join(rows) + "</table>"


def _point_name(r: dict) -> str:
    return (
        f"{html.escape(r['model'])}/{html.escape(r['profile'])}/{html.escape(str(r['point_id']))}"
    )


def _change(r: dict) -> str:
    """One delta as a line: `point: metric stat base -> head unit (rel`."""
    return (
        f"{_point_name(r)}: {html.escape(r['label'])} {r['stat']} {_fmt(r['base'])} &rarr; "
        f"{_fmt(r['head'])} {html.escape(r['unit'])} ({_fmt(r['rel_delta'], pct=True)}"
    )


def _names(cmp: Comparison) -> tuple[str, str]:
    n = {s.side: s.name for s in cmp.names}
    return n.get("base", "base"), n.get("head", "head")


def _opening(cmp: Comparison) -> list[str]:
    """The page's head, the forced-comparison banner, the title (the sides by name) and the kind."""
    base, head = _names(cmp)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>qualflow compare: {html.escape(base)} vs "
        f"{html.escape(head)}</title><style>{CSS}</style></head><body>"
    ]
    if cmp.problems:
        parts.append(
            "<div class='banner' id='forced'>FORCED COMPARISON: these runs are not comparable; "
            "deltas below mix a software change with a workload/dataset change.<ul>"
            + "".join(f"<li>{html.escape(p)}</li>" for p in cmp.problems)
            + "</ul></div>"
        )
    parts.append(f"<h1>Compare: base {html.escape(base)} vs head {html.escape(head)}</h1>")
    parts.append(
        f"<p id='kind' data-kind='{html.escape(cmp.kind)}'><b>{html.escape(cmp.kind)}</b>: "
        f"{html.escape(cmp.kind_detail)}</p>"
    )
    return parts


def m_floor(m: pd.DataFrame) -> str:
    """The default floor the verdicts name (from the first verdict that names one)."""
    named = [v for v in m["verdict"].astype(str) if "default floor of" in v] if len(m) else []
    return named[0].split("default floor of ", 1)[1] if named else "the default floor"


def _verdict(m: pd.DataFrame, opts: CompareOptions) -> str:
    """The verdict box: significant changes, nothing testable, inconclusive deltas, or no change."""
    sig = m[m["significant"]] if len(m) else m
    if len(sig):
        items = "".join(
            f"<li class='{'reg' if direction(r['verdict']) == 'regression' else 'imp'}'>"
            f"{_change(r)}, {html.escape(r['verdict'])})</li>"
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
        items = "".join(f"<li>{_change(r)})</li>" for r in inc.to_dict("records"))
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


def _caveats(cmp: Comparison) -> list[str]:
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
            f"<p class='reg'>Status changed at {_point_name(r)}"
            f": {html.escape(str(r['base_status']))} "
            f"&rarr; {html.escape(str(r['head_status']))}</p>"
        )
    return parts


def _method(cmp: Comparison) -> str:
    return "<p><b>Method.</b> " + html.escape(method_text(cmp.options, cmp.words)) + "</p>"


def _points_view(pts: pd.DataFrame) -> pd.DataFrame:
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


def _order(key: tuple) -> tuple:
    return (key[0], key[1], _load_order(key[2]))


def _answer(cmp: Comparison) -> list[str]:
    """First: per point, each side's figures and the ratios; the verdict; the floor it used."""
    o = cmp.options
    floor = (
        "<p class='dim' id='floor'>"
        "Where run-to-run noise was not measured, a delta whose whole CI lies "
        f"beyond a default floor of {o.default_floor_pct} of the base value is judged "
        f"(--default-floor-rel); smaller ones stay inconclusive.</p>"
    )
    return [*compare_first.first_screen(cmp, _order), _verdict(cmp.metrics, o), floor]


def _protocol_and_plots(delta: Path, cdf: Path, cmp: Comparison) -> list[str]:
    return [
        "<h2>Protocol checks side by side</h2>",
        protocol_matrix.protocol_matrix_html(
            cmp.protocol, between="the sides", empty="No protocol checks on either side."
        ),
        "<h2>Delta chart with noise bands</h2>",
        img_tag(delta, "delta chart"),
        "<h2>Overlaid CDFs of TTFT and ITL per point</h2>",
        img_tag(cdf, "latency CDFs"),
    ]


def _details(summary: str, body: list[str] | str, open_: bool = False) -> str:
    body = "".join(body) if isinstance(body, list) else body
    return f"<details{' open' if open_ else ''}><summary>{summary}</summary>{body}</details>"


def _after(cmp: Comparison) -> list[str]:
    """Collapsible: the method, the noise discussion and caveats, the headline deltas, the
    provenance differences and the full tables."""
    prov = cmp.provenance
    diff = prov[prov["differs"]] if len(prov) else prov
    return [
        _details("Method", _method(cmp)),
        _details(
            "Run-to-run noise and what was not checked", _caveats(cmp) or ["<p>Nothing to add.</p>"]
        ),
        _details(
            "Headline figures, base &rarr; head (relative delta)", _headline_table(cmp.metrics)
        ),
        _details(f"Provenance differences ({len(diff)})", _table(diff)),
        *_full_tables(cmp),
    ]


def _full_tables(cmp: Comparison) -> list[str]:
    """Behind <details>: the points, every metric test, the identical provenance; then the points
    of one side only."""
    m, pv, prov = cmp.metrics, _points_view(cmp.points), cmp.provenance
    same = prov[~prov["differs"]] if len(prov) else prov
    parts = [
        f"<details><summary>Points: status, correctness and protocol pass counts ({len(pv)})"
        "</summary>"
        f"{_table(pv)}</details>",
        f"<details><summary>Metrics side by side ({len(m)} tests)</summary>{_metrics_table(m)}"
        "</details>",
        f"<details><summary>Identical provenance ({len(same)} fields)</summary>{_table(same)}"
        "</details>",
    ]
    if len(cmp.only_in):
        parts += ["<h2>Points in only one side (not compared)</h2>", _table(cmp.only_in)]
    return parts


def write_compare_page(cmp: Comparison, out: str | Path) -> Path:
    """compare.html (and cdf.png, delta.png beside it) in `out`: the answer (per-point tables, the
    verdict), the protocol matrix, the plots, then the collapsible method, noise and tables."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cdf, delta = cdf_plot(cmp, out), delta_plot(cmp, out)
    parts = [
        *_opening(cmp),
        *_answer(cmp),
        *_protocol_and_plots(delta, cdf, cmp),
        *_after(cmp),
        "</body></html>",
    ]
    page = out / "compare.html"
    page.write_text("\n".join(parts))
    return page
