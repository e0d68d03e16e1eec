"""The report's first screen, for a reader with one minute: one verdict per model/profile/point
(rung reached, SLO misses), the headline figures with their CI over repeats, and where a workload
ran the harness ceiling, the point's share of it and which side is the limit; the highest load
meeting the SLO per workload; then the plots a performance engineer reads first:
throughput-latency curves with the SLO bounds, latency CDFs and the per-request time breakdown.
Points are ordered by load."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from qualflow.evidence.samples import runs_without_server_timing, sample_rows
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


def _fig(targets: pd.DataFrame, run_id, point_id, figure, fallback):
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
            m, lo, hi, n = _fig(targets, r["run_id"], r["point_id"], col, r.get(col))
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


def _log_if_decades(ax, values, axis="y"):
    v = np.asarray([x for x in values if x is not None and np.isfinite(x) and x > 0])
    if len(v) and v.max() / v.min() >= 10:
        from matplotlib.ticker import NullFormatter

        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
        (ax.yaxis if axis == "y" else ax.xaxis).set_minor_formatter(NullFormatter())


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _curve(ax, g: pd.DataFrame, targets: pd.DataFrame, metric: str) -> list:
    """One workload's p50 and p99 of `metric` against output tokens/s, per load kind, each p50
    marker labelled with its load; returns the y values drawn."""
    ys = []
    for kind, gk in g.groupby("_kind", sort=False):
        x = [
            _fig(targets, r, pt, "output_token_throughput_tps", v)[0]
            for r, pt, v in zip(gk["run_id"], gk["point_id"], gk["output_token_throughput_tps"])
        ]
        for stat, style in (("p50", "o-"), ("p99", "s--")):
            y = [
                _fig(targets, r, pt, f"{metric}_{stat}", v)[0]
                for r, pt, v in zip(gk["run_id"], gk["point_id"], gk[f"{metric}_{stat}"])
            ]
            ys += y
            ax.plot(
                x, y, style, label=f"{stat} ({'concurrency' if kind == 'concurrency' else 'rate'})"
            )
            for xx, yy, ld in zip(x, y, gk["_load"]):
                if stat == "p50" and xx is not None and yy is not None:
                    ax.annotate(
                        f"{'c' if kind == 'concurrency' else 'r'}{ld:g}",
                        (xx, yy),
                        fontsize=7,
                        textcoords="offset points",
                        xytext=(3, 3),
                    )
    return ys


def _slo_bounds(ax, targets: pd.DataFrame, key: tuple, metric: str) -> list:
    """The SLO bounds on `metric` of one model/profile/workload as dotted red lines; returns
    them."""
    if targets.empty:
        return []
    m, p, wl = key
    b = targets[
        (targets["model"] == m)
        & (targets["profile"] == p)
        & (targets["workload"] == wl)
        & targets["figure"].astype(str).str.startswith(metric)
        & targets["bound"].notna()
    ]
    bounds = []
    for (fig_name, bound), _ in b.groupby(["figure", "bound"]):
        ax.axhline(bound, color="#b00020", lw=0.9, ls=":")
        ax.annotate(
            f"SLO {fig_name.rsplit('_', 1)[-1]} {bound:g}",
            (0, bound),
            xycoords=("axes fraction", "data"),
            fontsize=7,
            color="#b00020",
            xytext=(2, 2),
            textcoords="offset points",
        )
        bounds.append(bound)
    return bounds


def _curves_png(groups: list, targets: pd.DataFrame, out: Path) -> tuple[str, str]:
    """Throughput-latency curves: one row per model/profile/workload, TTFT and ITL."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(groups), 2, figsize=(10, 3.3 * len(groups)), squeeze=False)
    for i, ((m, p, wl), g) in enumerate(groups):
        for j, (metric, lab) in enumerate((("client_ttft_ms", "TTFT"), ("client_itl_ms", "ITL"))):
            ax = axes[i][j]
            ys = _curve(ax, g, targets, metric)
            ys += _slo_bounds(ax, targets, (m, p, wl), metric)
            _log_if_decades(ax, ys)
            ax.set_xlabel("output tokens/s (AIPerf)", fontsize=8)
            ax.set_ylabel(f"{lab} (ms)", fontsize=8)
            ax.set_title(f"{m}/{p}/{wl}: {lab} vs throughput", fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=100)
    plt.close(fig)
    return (
        "curves.png",
        "Throughput-latency curves per workload: TTFT and ITL p50 (dots) and p99 (squares) "
        "against output tokens/s, one marker per load (c = concurrency, r = request rate), "
        "SLO bounds dotted red",
    )


def _cdfs_png(prof: pd.DataFrame, order: list[tuple], out: Path) -> tuple[str, str]:
    """Latency CDFs (TTFT, ITL, request latency), one line per point in load order."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, (metric, lab) in zip(
        axes,
        (
            ("client_ttft_ms", "TTFT"),
            ("client_itl_ms", "ITL"),
            ("client_request_latency_ms", "request latency"),
        ),
    ):
        allv = []
        for _, pid, label in order:
            # every repeat of the point: its run ids start with the session run id
            d = (
                pd.to_numeric(prof[prof["point_id"] == pid][metric], errors="coerce")
                .dropna()
                .sort_values()
            )
            if len(d):
                ax.step(d.values, np.arange(1, len(d) + 1) / len(d), where="post", label=label)
                allv += list(d.values)
        _log_if_decades(ax, allv, "x")
        ax.set_xlabel(f"{lab} (ms)", fontsize=8)
        ax.set_ylabel("fraction of requests", fontsize=8)
        ax.set_title(f"{lab} CDF", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "cdfs.png", dpi=100)
    plt.close(fig)
    return (
        "cdfs.png",
        "Latency CDFs per point (profiling requests of every repeat, warm-up excluded), "
        "points in load order",
    )


def _breakdown_png(prof: pd.DataFrame, order: list[tuple], out: Path) -> tuple[str, str]:
    """Where a request's time goes, per point: stacked means of queue wait, prefill, decode and
    the gap."""
    plt = _pyplot()
    parts = (
        ("server_queue_wait_ms", "queue wait"),
        ("server_prefill_ms", "prefill"),
        ("server_decode_ms", "decode"),
        ("client_minus_task_wall_ms", "client - task gap"),
    )
    means = {
        lab: [
            float(pd.to_numeric(prof[prof["point_id"] == pid][c], errors="coerce").mean())
            for _, pid, _ in order
        ]
        for c, lab in parts
    }
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(order) + 2), 3.6))
    bottom = np.zeros(len(order))
    for lab, v in means.items():
        v = np.nan_to_num(np.asarray(v))
        ax.bar(range(len(order)), v, bottom=bottom, label=lab)
        bottom += v
    ax.set_xticks(range(len(order)), [o[2] for o in order], rotation=20, fontsize=7)
    ax.set_ylabel("mean ms per request")
    ax.set_title("Where a request's time goes (mean per point, load order)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "breakdown.png", dpi=100)
    plt.close(fig)
    return (
        "breakdown.png",
        "Per-request time breakdown per point: server queue wait, prefill, decode, and "
        "the client - Task call gap (HTTP, SSE, network, client)",
    )


def plots(ev: dict[str, pd.DataFrame], out: Path) -> list[tuple[str, str]]:
    """The first screen's figures, (file name, caption) each: the throughput-latency curves, and
    with samples (evidence.samples: an endpoint's client-only rows too) the latency CDFs and the
    time breakdown."""
    summ, req, targets = ev["summary"], ev["requests"], ev.get("targets", pd.DataFrame())
    if summ.empty:
        return []
    pts = ordered_points(summ)
    groups = list(pts.groupby(["model", "profile", "_wl"], sort=False))
    if not groups:
        return []
    figs = [_curves_png(groups, targets, out)]
    prof = sample_rows(req, runs_without_server_timing(ev["runs"])) if not req.empty else req
    order = [
        (r["run_id"], r["point_id"], f"{r['model']}/{r['profile']}/{r['point_id']}")
        for r in pts.to_dict("records")
    ]
    if len(prof):
        figs += [_cdfs_png(prof, order, out), _breakdown_png(prof, order, out)]
    return figs


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
