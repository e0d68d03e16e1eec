"""The report's further figures, below its first screen: the client latency distributions per
point, client vs server timing per request, and throughput vs concurrency."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

DISTRIBUTIONS = (
    ("client_ttft_ms", "Time to first token (client, ms)"),
    ("client_itl_ms", "Inter-token latency (client, ms)"),
    ("client_request_latency_ms", "Request latency (client, ms)"),
)


def _distributions(plt, prof: pd.DataFrame, labels: list, out: Path) -> list[tuple[str, str]]:
    """A box plot per metric of DISTRIBUTIONS, one box per point."""
    figs = []
    for metric, title in DISTRIBUTIONS:
        data = [
            pd.to_numeric(prof[prof["label"] == lab][metric], errors="coerce").dropna()
            for lab in labels
        ]
        if not any(len(d) for d in data):
            continue
        fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(labels)), 3.6))
        ax.boxplot([d.values for d in data], showfliers=True)
        ax.set_xticks(range(1, len(labels) + 1), labels, rotation=20, fontsize=7)
        ax.set_title(title)
        ax.set_ylabel("ms")
        fig.tight_layout()
        name = f"dist_{metric}.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        figs.append((name, f"{title} per workload point (profiling requests, warm-up excluded)"))
    return figs


def _client_vs_server(plt, prof: pd.DataFrame, labels: list, out: Path) -> tuple[str, str]:
    """Client end-to-end latency against the server's Task call wall time, per request."""
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for lab in labels:
        d = prof[prof["label"] == lab]
        ax.scatter(
            pd.to_numeric(d["public_task_call_wall_ms"], errors="coerce"),
            pd.to_numeric(d["client_e2e_ms"], errors="coerce"),
            s=10,
            label=lab,
        )
    lim = pd.to_numeric(prof["client_e2e_ms"], errors="coerce").max()
    if pd.notna(lim):
        ax.plot([0, lim], [0, lim], "k--", lw=0.8, label="client = server")
    ax.set_xlabel("server public_task_call_wall (ms)")
    ax.set_ylabel("client end-to-end (ms)")
    ax.set_title("Client vs server timing per request")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "client_vs_server.png", dpi=110)
    plt.close(fig)
    return (
        "client_vs_server.png",
        "Client end-to-end latency vs the server's Task call wall time, "
        "per profiling request; the gap is HTTP/SSE/network/client",
    )


def _throughput(plt, summ: pd.DataFrame, out: Path) -> tuple[str, str]:
    """Output-token throughput against concurrency, one line per model/profile."""
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for (m, p), g in summ.groupby(["model", "profile"]):
        g = g.sort_values("concurrency")
        ax.plot(
            g["concurrency"],
            g["output_token_throughput_tps"],
            "o-",
            label=f"{m}/{p} output tok/s",
        )
    ax.set_xlabel("concurrency")
    ax.set_ylabel("output tokens/s")
    ax.set_title("Throughput vs concurrency (AIPerf)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "throughput_vs_concurrency.png", dpi=110)
    plt.close(fig)
    return ("throughput_vs_concurrency.png", "Output-token throughput vs concurrency")


def plots(ev: dict[str, pd.DataFrame], out: Path) -> list[tuple[str, str]]:
    """The further figures, (file name, caption) each, from the matched profiling requests and
    the summary; none without requests."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    req, summ = ev["requests"], ev["summary"]
    if req.empty:
        return []
    prof = req[(req["phase"] == "profiling") & (req["match_status"] == "matched")].copy()
    prof["label"] = prof["model"] + "/" + prof["profile"] + "/" + prof["point_id"].astype(str)
    labels = sorted(prof["label"].unique())
    figs = _distributions(plt, prof, labels, out)
    if len(prof):
        figs.append(_client_vs_server(plt, prof, labels, out))
    if not summ.empty and summ["request_throughput_rps"].notna().any():
        figs.append(_throughput(plt, summ, out))
    return figs
