"""`qualflow report`: one HTML page (+ matplotlib PNGs) over one or more evidence directories."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pandas as pd

from qualflow.evidence.compare.protocol import protocol_by_stack
from qualflow.evidence.freshness import stale_reasons
from qualflow.evidence.schema import STATUS_LADDER, TABLE_NAMES
from qualflow.evidence.status import stale_status
from qualflow.report import first_screen, identity, protocol_matrix, reasoning_table, turns
from qualflow.report.evidence_tables import evidence_sections, ladder_html
from qualflow.report.markup import img_tag, table_html
from qualflow.report.verdict import IDENTITY_FILE


def load_evidence(dirs: list[str | Path]) -> dict[str, pd.DataFrame]:
    """Every table of the evidence directories, concatenated; the runs of a directory whose sources
    changed since its join read as stale (qualflow.evidence.freshness)."""
    out = {t: [] for t in TABLE_NAMES}
    for d in dirs:
        stale = stale_reasons(d)
        for t in TABLE_NAMES:
            p = Path(d) / f"{t}.parquet"
            if p.exists():
                df = pd.read_parquet(p)
                out[t].append(stale_status(df, stale) if t == "runs" else df)
    return {t: (pd.concat(v, ignore_index=True) if v else pd.DataFrame()) for t, v in out.items()}


def status_table(ev: dict[str, pd.DataFrame]) -> pd.DataFrame:
    runs, summ, corr, proto = ev["runs"], ev["summary"], ev["correctness"], ev["protocol"]
    if runs.empty:
        return pd.DataFrame(columns=["model", "profile", "point_id", "status", "status_reasons"])
    rows = []
    for r in runs.to_dict("records"):
        c = corr[corr["run_id"] == r["run_id"]] if not corr.empty else corr
        p = proto[proto["run_id"] == r["run_id"]] if not proto.empty else proto
        s = (
            summ[(summ["run_id"] == r["run_id"]) & (summ["point_id"] == r["point_id"])]
            if not summ.empty
            else summ
        )
        s = s.iloc[0] if len(s) else {}
        rows.append(
            {
                "software_key": r["software_key"],
                "run_id": r["run_id"],
                "model": r["model"],
                "profile": r["profile"],
                "point_id": r["point_id"],
                "stack": r.get("stack") or "qualflow",
                "status": r["status"],
                "correctness_passed": f"{int(c['passed'].sum()) if len(c) else 0}/{len(c)}",
                "protocol_passed": f"{int(p['passed'].sum()) if len(p) else 0}/{len(p)}",
                "aiperf_records": s.get("n_client"),
                "server_records": s.get("n_server"),
                "matched": s.get("n_matched"),
                "output_tps": s.get("output_token_throughput_tps"),
                "ttft_p50_ms": s.get("client_ttft_ms_p50"),
                "itl_p50_ms": s.get("client_itl_ms_p50"),
                "status_reasons": r["status_reasons"],
            }
        )
    return pd.DataFrame(rows)


def _plots(ev: dict[str, pd.DataFrame], out: Path) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    req, summ = ev["requests"], ev["summary"]
    figs = []
    if req.empty:
        return figs
    prof = req[(req["phase"] == "profiling") & (req["match_status"] == "matched")].copy()
    prof["label"] = prof["model"] + "/" + prof["profile"] + "/" + prof["point_id"].astype(str)
    labels = sorted(prof["label"].unique())
    for metric, title in (
        ("client_ttft_ms", "Time to first token (client, ms)"),
        ("client_itl_ms", "Inter-token latency (client, ms)"),
        ("client_request_latency_ms", "Request latency (client, ms)"),
    ):
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
    # client vs server per request
    if len(prof):
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
        figs.append(
            (
                "client_vs_server.png",
                "Client end-to-end latency vs the server's Task call wall time, "
                "per profiling request; the gap is HTTP/SSE/network/client",
            )
        )
    if not summ.empty and summ["request_throughput_rps"].notna().any():
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
        figs.append(("throughput_vs_concurrency.png", "Output-token throughput vs concurrency"))
    return figs


def write_report(evidence_dirs: list[str | Path], out: str | Path) -> dict:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ev = load_evidence(evidence_dirs)
    st = status_table(ev)
    st.to_csv(out / "status.tsv", sep="\t", index=False)
    first_figs = first_screen.plots(ev, out)
    figs = _plots(ev, out)
    summ = ev["summary"]
    timing_cols = [
        "model",
        "profile",
        "point_id",
        "n_matched",
        "client_request_latency_ms_p50",
        "public_task_call_wall_ms_p50",
        "client_minus_task_wall_ms_p50",
        "client_ttft_ms_p50",
        "server_queue_wait_ms_p50",
        "server_prefill_ms_p50",
        "client_itl_ms_p50",
        "server_decode_ms_p50",
        "request_throughput_rps",
        "output_token_throughput_tps",
    ]
    timing = summ[[c for c in timing_cols if c in summ]] if not summ.empty else summ
    runs = ev["runs"]
    startup = (
        pd.DataFrame(
            [
                {
                    "run_id": r["run_id"],
                    **json.loads(r["startup"] or "{}"),
                    **{f"stage:{k}": v for k, v in json.loads(r["stage_times"] or "{}").items()},
                }
                for r in runs.drop_duplicates("run_id").to_dict("records")
            ]
        )
        if not runs.empty
        else runs
    )
    proto = (
        ev["protocol"][["run_id", "name", "passed", "detail"]]
        if not ev["protocol"].empty
        else ev["protocol"]
    )
    corr = ev["correctness"]
    corr_counts = (
        (
            corr.groupby(["run_id", "criterion"])["passed"]
            .agg(["sum", "count"])
            .reset_index()
            .rename(columns={"sum": "passed", "count": "cases"})
        )
        if not corr.empty
        else corr
    )
    req = ev["requests"]
    acct = (
        req.groupby(["run_id", "phase", "match_status"]).size().reset_index(name="requests")
        if not req.empty
        else req
    )

    def figure(name, caption):
        return (
            f"<figure>{img_tag(out / name, caption)}<figcaption>{html.escape(caption)} "
            f"(<a href='{name}'>{name}</a>)</figcaption></figure>"
        )

    slo = first_screen.slo_table(ev)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>qualflow report</title><style>"
        "body{font-family:sans-serif;max-width:1200px;margin:2em auto;font-size:14px}"
        "table.t{border-collapse:collapse;font-size:12px}"
        "table.t td,table.t th{border:1px solid #ccc;padding:2px 6px}"
        "img{max-width:100%;border:1px solid #eee}.s-aiperf-qualified{color:green}"
        f"{first_screen.CSS}details>summary{{cursor:pointer;font-weight:bold}}{protocol_matrix.CSS}"
        "</style></head><body>",
        "<h1>qualflow qualification report</h1>",
        identity.identity_html(runs),
        f"<p>Status ladder: {' &rarr; '.join(STATUS_LADDER)}. Evidence: "
        + ", ".join(html.escape(str(d)) for d in evidence_dirs)
        + "</p>",
        "<h2>Verdicts</h2>",
        first_screen.verdicts_html(ev),
        first_screen.max_load_html(ev),
        reasoning_table.reasoning_html(ev),
        turns.turns_html(ev),
        "<h2>Protocol checks by stack</h2>",
        protocol_matrix.protocol_matrix_html(
            protocol_by_stack(ev["protocol"], runs),
            between="the stacks",
            empty="No protocol checks ran.",
        ),
        *(figure(n, c) for n, c in first_figs),
        "<details><summary>SLOs: every bound, measured mean and CI over repeats</summary>",
        table_html(slo, "{:.4g}") if not slo.empty else "<p><i>no SLOs configured</i></p>",
        "</details>",
        "<h2>Full tables and further figures</h2>",
        "<details><summary>Status of every run</summary>",
        "<h2>Status</h2>",
        table_html(st, "{:.2f}"),
        ladder_html(st),
        "</details><details><summary>"
        "Correctness, protocol, request accounting, client vs server timing, start-up</summary>",
        "<h2>Family correctness (pass counts)</h2>",
        table_html(corr_counts, "{:.2f}"),
        "<h2>Protocol checks</h2>",
        f"<p>{int(proto['passed'].sum()) if len(proto) else 0} of {len(proto)} passed.</p>",
        table_html(proto, "{:.2f}"),
        "<h2>Request accounting</h2><p>"
        "Every AIPerf record and every server record is one row: matched, "
        "client-only or server-only. Warm-up rows are kept and flagged, and excluded from every "
        "figure.</p>",
        table_html(acct, "{:.2f}"),
        "<h2>Client vs server timing (p50, ms)</h2><p>"
        "Client figures are AIPerf's (HTTP + SSE + network + "
        "client); <code>public_task_call_wall</code> is the server's Task call; never merged.</p>",
        table_html(timing, "{:.2f}"),
        "<h2>Load, startup, warm-up and stage times (s)</h2><p>Never part of steady-state figures."
        "</p>",
        table_html(startup, "{:.2f}"),
        "</details>",
        "<details><summary>Evidence tables</summary>",
        evidence_sections(ev),
        "</details>",
        "<details open><summary>Distributions</summary><h2>Figures</h2>",
        *(figure(n, c) for n, c in figs),
        "</details>",
    ]
    parts.append("</body></html>")
    (out / "report.html").write_text("\n".join(parts))
    (out / IDENTITY_FILE).write_text(identity.identity_line(runs) + "\n")
    return {
        "status": st[["run_id", "point_id", "status"]].to_dict("records"),
        "figures": [f for f, _ in first_figs + figs],
    }


def main_report(a) -> int:
    res = write_report(a.evidence, a.out)
    print(json.dumps(res, indent=2))
    return 0


def main_status(a) -> int:
    """Print the status table over evidence dirs; with --require, fail unless every point reached
    it."""
    ev = load_evidence(a.evidence)
    st = status_table(ev)
    if a.out:
        st.to_csv(a.out, sep="\t", index=False)
    with pd.option_context("display.width", 200, "display.max_colwidth", 80):
        print(st.drop(columns=["software_key"]).to_string(index=False))
    if a.require:
        need = STATUS_LADDER.index(a.require)
        low = st[st["status"].map(STATUS_LADDER.index) < need]
        if st.empty or len(low):
            print(f"qualflow status: {len(low) if len(st) else 'no'} point(s) below {a.require}")
            return 1
    return 0
