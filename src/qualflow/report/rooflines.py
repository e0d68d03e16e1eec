"""The report's rooflines: each point's output tok/s beside its roofline (evidence.roofline: the
bundle's weight and K/V reads at the GPU's datasheet bandwidth, its prefill at the peak FP16
FLOP/s) and its share of it, or why the point has none (a CPU session, a GPU not in the table)."""

from __future__ import annotations

import html

import pandas as pd

from qualflow.report.first_screen import _num, ordered_points, point_figure

NOTE = (
    "<p class='ci'>Roofline: the point's output tok/s limit at its concurrency, ISL and OSL: every "
    "decode step reads all the weights and each sequence's K/V at the GPU's datasheet bandwidth, "
    "its prefill runs 2 FLOPs per parameter and prompt token at the peak dense FP16 FLOP/s "
    "(qualflow.roofline). A point whose prompts share a cached prefix needs less prefill than "
    "that, so its share may pass 100%.</p>"
)


def _cells(r: dict, shown) -> str:
    limit = r.get("roofline_output_token_throughput_tps")
    if limit is None or pd.isna(limit):
        why = r.get("roofline_reasons")
        return (
            f"<td colspan='3' class='why'>{html.escape(why if isinstance(why, str) else '')}</td>"
        )
    share = shown / limit if shown is not None and pd.notna(shown) else None
    return (
        f"<td>{html.escape(str(r.get('roofline_gpu') or ''))}</td><td>{_num(limit)}</td>"
        f"<td>{'' if share is None else f'{share:.1%}'}</td>"
    )


def rooflines_html(ev: dict[str, pd.DataFrame]) -> str:
    """One row per point: its output tok/s (the mean over its repeats, as the verdicts show it),
    the GPU, the roofline and the share, or why there is none; "" for evidence without the
    roofline columns."""
    summ = ev["summary"]
    if summ.empty or not {"roofline_reasons", "roofline_output_token_throughput_tps"} & set(summ):
        return ""
    targets = ev.get("targets", pd.DataFrame())
    rows = [
        "<h3>Share of the roofline</h3><table class='t verdicts'><tr><th>model/profile/point</th>"
        "<th>output tok/s</th><th>GPU</th><th>roofline tok/s</th><th>share of roofline</th></tr>"
    ]
    col = "output_token_throughput_tps"
    for r in ordered_points(summ).to_dict("records"):
        shown = point_figure(targets, r["run_id"], r["point_id"], col, r.get(col))[0]
        name = html.escape(f"{r['model']}/{r['profile']}/{r['point_id']}")
        rows.append(f"<tr><td>{name}</td><td>{_num(shown)}</td>{_cells(r, shown)}</tr>")
    return "".join(rows) + "</table>" + NOTE
