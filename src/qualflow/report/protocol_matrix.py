"""The protocol-check matrix as HTML (built by `qualflow.evidence.compare.protocol`): one row per
check, one column per side, FAIL cells marked and the rows where the sides differ highlighted."""

from __future__ import annotations

import html

from qualflow.evidence.compare.protocol import FAIL, ProtocolMatrix

CSS = ".differs td{background:#fff3cd}"


def protocol_matrix_html(mx: ProtocolMatrix, *, between: str, empty: str) -> str:
    """`between`: what the sides are ("the stacks", "the sides"); `empty`: the line shown when no
    check ran."""
    if mx.empty:
        return f"<p>{html.escape(empty)}</p>"
    t = mx.table
    cols = [c for c in t.columns if c != "differs"]
    rows = [
        "<table class='t' id='protocol-matrix'><tr>"
        + "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
        + "</tr>"
    ]
    for r in t.to_dict("records"):
        cells = "".join(
            f"<td class='reg'>{html.escape(str(r[c]))}</td>"
            if r[c] == FAIL
            else f"<td>{html.escape(str(r[c]))}</td>"
            for c in cols
        )
        rows.append(f"<tr class='{'differs' if r['differs'] else 'same'}'>{cells}</tr>")
    n = int(t["differs"].sum())
    return (
        "\n".join(rows)
        + f"</table><p>{n} of {len(t)} checks differ between {html.escape(between)}.</p>"
    )
