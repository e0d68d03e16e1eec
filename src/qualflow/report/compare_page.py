"""The compare page: a self-contained HTML page (plots embedded as base64; the PNGs also lie beside
it for Snakemake's --report) over a `Comparison`."""
from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from qualflow.evidence.compare import INCONCLUSIVE, METRICS, Comparison, method_text
from qualflow.report.markup import img_tag, table_html

CSS = ("body{font-family:sans-serif;max-width:1250px;margin:1.5em auto;font-size:14px;color:#222}"
       "table.t{border-collapse:collapse;font-size:12px;margin:.4em 0}"
       "table.t td,table.t th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
       "table.t th{background:#f3f3f3}table.t td:first-child{text-align:left}"
       ".differs td{background:#fff3cd}.banner{background:#b00020;color:#fff;padding:.8em 1em;font-weight:bold;border-radius:4px}"
       ".verdict{font-size:16px;padding:.6em 1em;border-radius:4px;background:#eef5ee;border:1px solid #9c9}"
       ".verdict.bad{background:#fdecea;border-color:#e99}"
       ".verdict.inc{background:#fff8e1;border-color:#e0c060}.inc{color:#8a6d00;font-weight:bold}"
       ".reg{color:#b00020;font-weight:bold}.imp{color:#1b7f2a;font-weight:bold}.dim{color:#888}"
       "img{max-width:100%;border:1px solid #eee}details{margin:.5em 0}code{background:#f5f5f5}")


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


def _cdf_plot(cmp: Comparison, out: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted(cmp.samples)
    ms = [("client_ttft_ms", "TTFT (ms)"), ("client_itl_ms", "ITL (ms)")]
    fig, axes = plt.subplots(len(keys), 2, figsize=(10, 2.8 * len(keys)), squeeze=False)
    for i, k in enumerate(keys):
        for j, (m, lab) in enumerate(ms):
            ax = axes[i][j]
            for side, color in (("base", "#1f77b4"), ("head", "#d62728")):
                x = np.sort(cmp.samples[k][side][m])
                if len(x):
                    ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", color=color,
                            label=f"{side} ({len(x)} req)")
            ax.set_title(f"{'/'.join(k)}: {lab}", fontsize=9)
            ax.set_xlabel(lab, fontsize=8)
            ax.set_ylabel("fraction of requests", fontsize=8)
            ax.grid(alpha=.3)
            ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Client latency CDFs: base {cmp.base} (blue) vs head {cmp.head} (red)", fontsize=10)
    fig.tight_layout()
    p = out / "cdf.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    return p


def _delta_plot(cmp: Comparison, out: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = cmp.metrics
    m = m[m["stat"].isin(["p50", "p90"]) & m["metric"].isin([x[0] for x in METRICS])] if len(m) else m
    m = m.reset_index(drop=True)
    n = max(len(m), 1)
    fig, ax = plt.subplots(figsize=(10, 0.32 * n + 1.4))
    labels = []
    for i, r in enumerate(m.to_dict("records")):
        y = n - 1 - i
        base = abs(r["base"]) if r["base"] else float("nan")
        rel = 100 * r["rel_delta"]
        lo, hi = 100 * r["ci_low"] / base, 100 * r["ci_high"] / base
        fl = 100 * r["noise_floor"] / base if np.isfinite(base) else float("nan")
        if np.isfinite(fl):
            ax.add_patch(plt.Rectangle((-fl, y - .4), 2 * fl, .8, color="#bbb", alpha=.45, lw=0))
        color = "#b00020" if r["verdict"] == "regression" else "#1b7f2a" if r["verdict"] == "improvement" else "#555"
        if np.isfinite(lo) and np.isfinite(hi):
            ax.plot([lo, hi], [y, y], color=color, lw=2)
        ax.plot([rel], [y], "o", color=color)
        labels.append(f"{r['point_id']} {r['label']} {r['stat']}")
    ax.axvline(0, color="k", lw=.8)
    ax.set_yticks(range(n), list(reversed(labels)) if labels else [""], fontsize=7)
    ax.set_ylim(-.6, n - .4)
    ax.set_xlabel("relative delta head vs base (%)  -  dot: delta, line: bootstrap CI, grey band: noise floor")
    ax.set_title("Delta per metric (red: significant regression, green: significant improvement, grey: within noise)",
                 fontsize=9)
    ax.grid(axis="x", alpha=.3)
    fig.tight_layout()
    p = out / "delta.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    return p


def _metrics_table(m: pd.DataFrame) -> str:
    if m.empty:
        return "<p><i>none</i></p>"
    rows = ["<table class='t'><tr><th>point</th><th>metric</th><th>stat</th><th>base</th><th>head</th>"
            "<th>delta</th><th>rel</th><th>BCa CI of delta (level)</th><th>noise floor</th><th>q (BH)</th><th>MW p</th>"
            "<th>n base/head</th><th>verdict</th></tr>"]
    for r in m.to_dict("records"):
        cls = {"regression": "reg", "improvement": "imp"}.get(r["verdict"], "dim")
        ci = (f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}] ({r['ci_level']:.2%})"
              if np.isfinite(r["ci_low"]) and np.isfinite(r["ci_level"]) else "")
        if r["verdict"] == INCONCLUSIVE:
            cls = "inc"
        rows.append(
            f"<tr><td>{html.escape(r['model'])}/{html.escape(r['profile'])}/{html.escape(str(r['point_id']))}</td>"
            f"<td>{html.escape(r['label'])} ({html.escape(r['unit'])})</td><td>{r['stat']}</td>"
            f"<td>{_fmt(r['base'])}</td><td>{_fmt(r['head'])}</td><td>{_fmt(r['delta'])}</td>"
            f"<td>{_fmt(r['rel_delta'], pct=True)}</td><td>{ci}</td><td>{_fmt(r['noise_floor'])}</td>"
            f"<td>{_fmt(r['q_value'])}</td><td>{_fmt(r['mw_p'])}</td><td>{_fmt(r['n_base'])}/{_fmt(r['n_head'])}</td>"
            f"<td class='{cls}'>{html.escape(r['verdict'])}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


HEADLINE = (("output tokens/s (AIPerf aggregate)", "aggregate"), ("TTFT", "p50"), ("TTFT", "p99"), ("ITL", "p50"),
            ("ITL", "p99"))


def _load_order(point_id: str) -> tuple:
    """Points ordered by load: concurrency or rate, read from the point id's `_c<N>` / `_r<N>` suffix."""
    import re
    m = re.search(r"_([cr])(\d+(?:p\d+)?)", str(point_id))
    return (str(point_id).split("_")[0], m.group(1) if m else "", float(m.group(2).replace("p", ".")) if m else 0.0)


def _headline_table(m: pd.DataFrame) -> str:
    """One row per point: throughput, TTFT and ITL p50/p99 as base -> head (relative delta), coloured
    by verdict."""
    if m.empty:
        return "<p><i>none</i></p>"
    keys = sorted({(r["model"], r["profile"], r["point_id"]) for r in m.to_dict("records")},
                  key=lambda k: (k[0], k[1], _load_order(k[2])))
    rows = ["<table class='t' id='headline'><tr><th>point</th>"
            + "".join(f"<th>{html.escape(label.split(' (')[0])} {stat}</th>" for label, stat in HEADLINE) + "</tr>"]
    for k in keys:
        cells = []
        for label, stat in HEADLINE:
            hit = m[(m["model"] == k[0]) & (m["profile"] == k[1]) & (m["point_id"] == k[2])
                    & (m["label"] == label) & (m["stat"] == stat)]
            if hit.empty:
                cells.append("<td></td>")
                continue
            r = hit.iloc[0]
            cls = {"regression": "reg", "improvement": "imp"}.get(r["verdict"], "dim")
            cells.append(f"<td class='{cls}' title='{html.escape(str(r['verdict']), quote=True)}'>{_fmt(r['base'])} "
                         f"&rarr; {_fmt(r['head'])} ({_fmt(r['rel_delta'], pct=True)})</td>")
        rows.append(f"<tr><td>{html.escape(k[0])}/{html.escape(k[1])}/{html.escape(str(k[2]))}</td>{''.join(cells)}</tr>")
    return "\n".join(rows) + "</table>"


def protocol_matrix_html(mx: pd.DataFrame) -> str:
    """Check by check, which side passed; rows where the sides differ are marked."""
    if mx is None or mx.empty:
        return "<p>No protocol checks on either side.</p>"
    rows = ["<table id='protocol-matrix'><tr>" + "".join(f"<th>{html.escape(str(c))}</th>" for c in mx.columns
                                                         if c != "differs") + "</tr>"]
    for r in mx.to_dict("records"):
        cells = "".join(f"<td class='{'reg' if v == 'FAIL' else ''}'>{html.escape(str(v))}</td>"
                        for c, v in r.items() if c != "differs")
        rows.append(f"<tr class='{'differs' if r['differs'] else 'same'}'>{cells}</tr>")
    n = int(mx["differs"].sum())
    return "\n".join(rows) + f"</table><p>{n} of {len(mx)} checks differ between the sides.</p>"


def write_compare_page(cmp: Comparison, out: str | Path) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cdf, delta = _cdf_plot(cmp, out), _delta_plot(cmp, out)
    m, pts = cmp.metrics, cmp.points
    sig = m[m["significant"]] if len(m) else m
    o = cmp.options
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>qualflow compare: {html.escape(cmp.base)} vs "
             f"{html.escape(cmp.head)}</title><style>{CSS}</style></head><body>"]
    if cmp.problems:
        parts.append("<div class='banner' id='forced'>FORCED COMPARISON: these runs are not comparable; "
                     "deltas below mix a software change with a workload/dataset change.<ul>"
                     + "".join(f"<li>{html.escape(p)}</li>" for p in cmp.problems) + "</ul></div>")
    parts.append(f"<h1>Compare: base <code>{html.escape(cmp.base)}</code> vs head <code>{html.escape(cmp.head)}</code></h1>")
    parts.append(f"<p id='kind' data-kind='{html.escape(cmp.kind)}'><b>{html.escape(cmp.kind)}</b>: "
                 f"{html.escape(cmp.kind_detail)}</p>")
    if len(sig):
        items = "".join(
            f"<li class='{'reg' if r['verdict'] == 'regression' else 'imp'}'>{html.escape(r['model'])}/"
            f"{html.escape(r['profile'])}/{html.escape(str(r['point_id']))}: {html.escape(r['label'])} {r['stat']} "
            f"{_fmt(r['base'])} &rarr; {_fmt(r['head'])} {html.escape(r['unit'])} ({_fmt(r['rel_delta'], pct=True)}, "
            f"{r['verdict']})</li>" for r in sig.to_dict("records"))
        parts.append(f"<div class='verdict bad' id='verdict'>{len(sig)} significant change(s) beyond run-to-run noise:"
                     f"<ul>{items}</ul></div>")
    elif not len(m) or not m["tested"].any():
        parts.append("<div class='verdict bad' id='verdict'>Nothing could be tested: too few requests per side "
                     "(a percentile needs >= 8 requests beyond it, p50 >= 16). The deltas below are not judged.</div>")
    elif (m["verdict"] == INCONCLUSIVE).any():
        inc = m[m["verdict"] == INCONCLUSIVE]
        items = "".join(
            f"<li>{html.escape(r['model'])}/{html.escape(r['profile'])}/{html.escape(str(r['point_id']))}: "
            f"{html.escape(r['label'])} {r['stat']} {_fmt(r['base'])} &rarr; {_fmt(r['head'])} {html.escape(r['unit'])} "
            f"({_fmt(r['rel_delta'], pct=True)})</li>" for r in inc.to_dict("records"))
        parts.append(f"<div class='verdict inc' id='verdict'>Inconclusive: run-to-run noise not measured. "
                     f"{len(inc)} delta(s) lie outside their within-run CI, but without run-to-run noise measured "
                     f"on both sides (or a configured floor) they cannot be told from it:<ul>{items}</ul></div>")
    else:
        parts.append("<div class='verdict' id='verdict'>No significant change: every tested delta is within "
                     "run-to-run noise.</div>")
    unmeasured = pts[~pts["noise_measured"].astype(bool)] if len(pts) else pts
    if len(unmeasured):
        floor = ("the configured floor applies" if o.floor_configured else
                 "no floor is configured, so no delta there can be significant")
        parts.append(f"<p id='noise-note'><b>Run-to-run noise not measured</b> for {len(unmeasured)} of {len(pts)} "
                     f"point(s): a side needs >= 2 comparable runs (same version, dataset, workload, server settings "
                     f"and status; repeats or re-qualifications in its history); {floor}. Qualify each version "
                     "again (or run repeats), or pass --noise-rel / --noise-abs-ms. On a shared host, identical "
                     "runs at different times can differ by far more than a within-run CI shows.</p>")
    for n in cmp.notes:
        parts.append(f"<p class='note'><b>Not checked:</b> {html.escape(n)}</p>")
    st_changed = pts[pts["status_changed"]] if len(pts) else pts
    for r in st_changed.to_dict("records"):
        parts.append(f"<p class='reg'>Status changed at {html.escape(r['model'])}/{html.escape(r['profile'])}/"
                     f"{html.escape(str(r['point_id']))}: {html.escape(str(r['base_status']))} &rarr; "
                     f"{html.escape(str(r['head_status']))}</p>")
    parts.append("<p><b>Method.</b> " + html.escape(method_text(o)) + "</p>")
    pv = pts.copy()
    if len(pv):
        pv = pd.DataFrame({
            "point": pv["model"] + "/" + pv["profile"] + "/" + pv["point_id"].astype(str),
            "base run": pv["base_run"], "head run": pv["head_run"],
            "status base": pv["base_status"], "status head": pv["head_status"],
            "correctness base": pv["base_correctness_passed"].astype(str) + "/" + pv["base_correctness_cases"].astype(str),
            "correctness head": pv["head_correctness_passed"].astype(str) + "/" + pv["head_correctness_cases"].astype(str),
            "protocol base": pv["base_protocol_passed"].astype(str) + "/" + pv["base_protocol_checks"].astype(str),
            "protocol head": pv["head_protocol_passed"].astype(str) + "/" + pv["head_protocol_checks"].astype(str),
            "requests base/head": pv["base_n"].astype(str) + "/" + pv["head_n"].astype(str),
            "comparable runs base/head": (pv["base_noise_runs"] + 1).astype(str) + "/"
                                         + (pv["head_noise_runs"] + 1).astype(str),
            "same dataset": pv["dataset_equal"], "same workload": pv["workload_equal"],
            "same server settings": pv["server_settings_equal"].map(
                lambda v: "unknown" if v is None or v != v else bool(v))})
    prov = cmp.provenance
    diff = prov[prov["differs"]] if len(prov) else prov
    same = prov[~prov["differs"]] if len(prov) else prov
    # the first screen: headline figures per point (in load order), then the plots; full tables after
    parts += ["<h2>Headline figures, base &rarr; head</h2>", _headline_table(m),
              "<h2>Delta chart with noise bands</h2>", img_tag(delta, "delta chart"),
              "<h2>Overlaid CDFs of TTFT and ITL per point</h2>", img_tag(cdf, "latency CDFs"),
              "<h2>Protocol checks side by side</h2>", protocol_matrix_html(cmp.protocol),
              f"<h2>Provenance differences ({len(diff)})</h2>", _table(diff)]
    parts += [f"<details><summary>Points: status, correctness and protocol pass counts ({len(pv)})</summary>"
              f"{_table(pv)}</details>",
              f"<details><summary>Metrics side by side ({len(m)} tests)</summary>{_metrics_table(m)}</details>",
              f"<details><summary>Identical provenance ({len(same)} fields)</summary>{_table(same)}</details>"]
    if len(cmp.only_in):
        parts += ["<h2>Points in only one side (not compared)</h2>", _table(cmp.only_in)]
    parts.append("</body></html>")
    page = out / "compare.html"
    page.write_text("\n".join(parts))
    return page
