"""The report's first-screen figures, the plots a performance engineer reads first: the
throughput-latency curves per workload with the SLO bounds, and with samples the latency CDFs and
the per-request time breakdown. Points are ordered by load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from qualflow.evidence.samples import runs_without_server_timing, sample_rows
from qualflow.report.first_screen import ordered_points, point_figure


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
            point_figure(targets, r, pt, "output_token_throughput_tps", v)[0]
            for r, pt, v in zip(gk["run_id"], gk["point_id"], gk["output_token_throughput_tps"])
        ]
        for stat, style in (("p50", "o-"), ("p99", "s--")):
            y = [
                point_figure(targets, r, pt, f"{metric}_{stat}", v)[0]
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
