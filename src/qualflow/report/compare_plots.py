"""The compare page's figures (PNG beside the page, embedded in it): overlaid latency CDFs per point
and the delta chart with its CIs and noise bands."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from qualflow.evidence.compare.comparison import Comparison
from qualflow.evidence.compare.stats import METRICS, direction


def cdf_plot(cmp: Comparison, out: Path) -> Path:
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
                    ax.step(
                        x,
                        np.arange(1, len(x) + 1) / len(x),
                        where="post",
                        color=color,
                        label=f"{side} ({len(x)} req)",
                    )
            ax.set_title(f"{'/'.join(k)}: {lab}", fontsize=9)
            ax.set_xlabel(lab, fontsize=8)
            ax.set_ylabel("fraction of requests", fontsize=8)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="lower right")
    names = {n.side: n.name for n in cmp.names}
    fig.suptitle(
        f"Client latency CDFs: base {names.get('base', 'base')} (blue) vs head "
        f"{names.get('head', 'head')} "
        "(red)",
        fontsize=10,
    )
    fig.tight_layout()
    p = out / "cdf.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    return p


def delta_plot(cmp: Comparison, out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = cmp.metrics
    m = (
        m[m["stat"].isin(["p50", "p90"]) & m["metric"].isin([x[0] for x in METRICS])]
        if len(m)
        else m
    )
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
            ax.add_patch(plt.Rectangle((-fl, y - 0.4), 2 * fl, 0.8, color="#bbb", alpha=0.45, lw=0))
        d = direction(r["verdict"])
        color = "#b00020" if d == "regression" else "#1b7f2a" if d == "improvement" else "#555"
        if np.isfinite(lo) and np.isfinite(hi):
            ax.plot([lo, hi], [y, y], color=color, lw=2)
        ax.plot([rel], [y], "o", color=color)
        labels.append(f"{r['point_id']} {r['label']} {r['stat']}")
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(n), list(reversed(labels)) if labels else [""], fontsize=7)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlabel(
        "relative delta head vs base (%)  -  dot: delta, line: bootstrap CI, grey band: noise floor"
    )
    worse, better = cmp.words
    ax.set_title(
        f"Delta per metric (red: significant {worse}, green: significant {better}, "
        "grey: within noise)",
        fontsize=9,
    )
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    p = out / "delta.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    return p
