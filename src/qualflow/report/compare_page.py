"""The compare page: a self-contained HTML page (plots embedded as base64; the PNGs also lie
beside it for Snakemake's --report) over a `Comparison`, a list of sections that answers first:
one table per point (report.compare_first) and the verdict, then the protocol matrix, then the
plots; the method, the noise discussion and the full tables after, collapsible. Sides are named
by their config names and pinned identities (evidence.compare.names), never by the paths they
were given as."""

from __future__ import annotations

import html
from pathlib import Path

from qualflow.evidence.compare.comparison import Comparison
from qualflow.evidence.compare.method import method_text
from qualflow.report import compare_first, protocol_matrix
from qualflow.report.compare_plots import cdf_plot, delta_plot
from qualflow.report.compare_tables import full_tables, headline_table, wide_table
from qualflow.report.compare_text import load_order
from qualflow.report.compare_verdict import caveats, verdict_box
from qualflow.report.markup import img_tag

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


def _method(cmp: Comparison) -> str:
    return "<p><b>Method.</b> " + html.escape(method_text(cmp.options, cmp.words)) + "</p>"


def _order(key: tuple) -> tuple:
    return (key[0], key[1], load_order(key[2]))


def _answer(cmp: Comparison) -> list[str]:
    """First: per point, each side's figures and the ratios; the verdict; the floor it used."""
    o = cmp.options
    floor = (
        "<p class='dim' id='floor'>"
        "Where run-to-run noise was not measured, a delta whose whole CI lies "
        f"beyond a default floor of {o.default_floor_pct} of the base value is judged "
        f"(--default-floor-rel); smaller ones stay inconclusive.</p>"
    )
    return [*compare_first.first_screen(cmp, _order), verdict_box(cmp.metrics, o), floor]


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
            "Run-to-run noise and what was not checked", caveats(cmp) or ["<p>Nothing to add.</p>"]
        ),
        _details(
            "Headline figures, base &rarr; head (relative delta)", headline_table(cmp.metrics)
        ),
        _details(f"Provenance differences ({len(diff)})", wide_table(diff)),
        *full_tables(cmp),
    ]


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
