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
from qualflow.report import (
    first_screen,
    first_screen_plots,
    further_plots,
    identity,
    protocol_matrix,
    reasoning_table,
    rooflines,
    run_tables,
    turns,
)
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


CSS = (
    "body{font-family:sans-serif;max-width:1200px;margin:2em auto;font-size:14px}"
    "table.t{border-collapse:collapse;font-size:12px}"
    "table.t td,table.t th{border:1px solid #ccc;padding:2px 6px}"
    "img{max-width:100%;border:1px solid #eee}.s-aiperf-qualified{color:green}"
    f"{first_screen.CSS}details>summary{{cursor:pointer;font-weight:bold}}{protocol_matrix.CSS}"
)


def _figure(out: Path, name: str, caption: str) -> str:
    """A figure embedded, captioned, with a link to its PNG beside the page."""
    return (
        f"<figure>{img_tag(out / name, caption)}<figcaption>{html.escape(caption)} "
        f"(<a href='{name}'>{name}</a>)</figcaption></figure>"
    )


def _first_screen(ev: dict, evidence_dirs: list, figs: list, out: Path) -> list[str]:
    """The head, the identity, the ladder, the verdicts, max load, the reasoning table, the
    protocol matrix, the first-screen figures and the SLOs."""
    runs, slo = ev["runs"], first_screen.slo_table(ev)
    return [
        "<!doctype html><html><head><meta charset='utf-8'><title>qualflow report</title><style>"
        f"{CSS}</style></head><body>",
        "<h1>qualflow qualification report</h1>",
        identity.identity_html(runs),
        f"<p>Status ladder: {' &rarr; '.join(STATUS_LADDER)}. Evidence: "
        + ", ".join(html.escape(str(d)) for d in evidence_dirs)
        + "</p>",
        "<h2>Verdicts</h2>",
        first_screen.verdicts_html(ev),
        first_screen.max_load_html(ev),
        rooflines.rooflines_html(ev),
        reasoning_table.reasoning_html(ev),
        turns.turns_html(ev),
        "<h2>Protocol checks by stack</h2>",
        protocol_matrix.protocol_matrix_html(
            protocol_by_stack(ev["protocol"], runs),
            between="the stacks",
            empty="No protocol checks ran.",
        ),
        *(_figure(out, n, c) for n, c in figs),
        "<details><summary>SLOs: every bound, measured mean and CI over repeats</summary>",
        table_html(slo, "{:.4g}") if not slo.empty else "<p><i>no SLOs configured</i></p>",
        "</details>",
    ]


def _full_tables(ev: dict, st: pd.DataFrame) -> list[str]:
    """Behind <details>: the status of every run; correctness, protocol, request accounting,
    client vs server timing and start-up; the evidence tables."""
    proto = run_tables.protocol_rows(ev["protocol"])
    return [
        "<h2>Full tables and further figures</h2>",
        "<details><summary>Status of every run</summary>",
        "<h2>Status</h2>",
        table_html(st, "{:.2f}"),
        ladder_html(st),
        "</details><details><summary>"
        "Correctness, protocol, request accounting, client vs server timing, start-up</summary>",
        "<h2>Family correctness (pass counts)</h2>",
        table_html(run_tables.correctness_counts(ev["correctness"]), "{:.2f}"),
        "<h2>Protocol checks</h2>",
        f"<p>{int(proto['passed'].sum()) if len(proto) else 0} of {len(proto)} passed.</p>",
        table_html(proto, "{:.2f}"),
        "<h2>Request accounting</h2><p>"
        "Every AIPerf record and every server record is one row: matched, "
        "client-only or server-only. Warm-up rows are kept and flagged, and excluded from every "
        "figure.</p>",
        table_html(run_tables.request_accounting(ev["requests"]), "{:.2f}"),
        "<h2>Client vs server timing (p50, ms)</h2><p>"
        "Client figures are AIPerf's (HTTP + SSE + network + "
        "client); <code>public_task_call_wall</code> is the server's Task call; never merged.</p>",
        table_html(run_tables.timing_table(ev["summary"]), "{:.2f}"),
        "<h2>Load, startup, warm-up and stage times (s)</h2><p>Never part of steady-state figures."
        "</p>",
        table_html(run_tables.startup_table(ev["runs"]), "{:.2f}"),
        "</details>",
        "<details><summary>Evidence tables</summary>",
        evidence_sections(ev),
        "</details>",
    ]


def write_report(evidence_dirs: list[str | Path], out: str | Path) -> dict:
    """report.html over the evidence directories in `out`, with status.tsv, the figures' PNGs and
    the runs' identity line beside it."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ev = load_evidence(evidence_dirs)
    st = run_tables.status_table(ev)
    st.to_csv(out / "status.tsv", sep="\t", index=False)
    first_figs = first_screen_plots.plots(ev, out)
    figs = further_plots.plots(ev, out)
    parts = [
        *_first_screen(ev, evidence_dirs, first_figs, out),
        *_full_tables(ev, st),
        "<details open><summary>Distributions</summary><h2>Figures</h2>",
        *(_figure(out, n, c) for n, c in figs),
        "</details>",
        "</body></html>",
    ]
    (out / "report.html").write_text("\n".join(parts))
    (out / IDENTITY_FILE).write_text(identity.identity_line(ev["runs"]) + "\n")
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
    st = run_tables.status_table(ev)
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
