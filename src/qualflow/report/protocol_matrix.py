"""The protocol-check matrix of a run report: check by check, which stack passed."""
from __future__ import annotations

import html

import pandas as pd


def protocol_by_stack(protocol: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per check, one column per stack (model/profile, with `stack` for an endpoint):
    pass | FAIL | not run; `differs` when the stacks disagree."""
    if protocol.empty or runs.empty:
        return pd.DataFrame(columns=["check", "differs"])
    label = {}
    for r in runs.drop_duplicates("run_id").to_dict("records"):
        stack = r.get("stack") if isinstance(r.get("stack"), str) else "qualflow"
        label[r["run_id"]] = f"{r['model']}/{r['profile']} ({stack})"
    p = protocol.assign(stack=protocol["run_id"].map(label))
    m = p.pivot_table(index="name", columns="stack", values="passed", aggfunc=lambda v: bool(all(v)))
    m = m.reindex(columns=[c for c in dict.fromkeys(label.values()) if c in m.columns])
    out = m.apply(lambda col: col.map(lambda v: "not run" if v is None or v != v else ("pass" if v else "FAIL")))
    out["differs"] = out.nunique(axis=1) > 1
    return out.reset_index().rename(columns={"name": "check"})


def protocol_matrix_html(mx: pd.DataFrame) -> str:
    if mx.empty:
        return "<p>No protocol checks ran.</p>"
    cols = [c for c in mx.columns if c != "differs"]
    rows = ["<table class='t' id='protocol-matrix'><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>"]
    for r in mx.to_dict("records"):
        style = " style='background:#fff3cd'" if r["differs"] else ""
        rows.append(f"<tr{style}>" + "".join(f"<td>{html.escape(str(r[c]))}</td>" for c in cols) + "</tr>")
    return "".join(rows) + f"</table><p>{int(mx['differs'].sum())} of {len(mx)} checks differ between the stacks.</p>"
