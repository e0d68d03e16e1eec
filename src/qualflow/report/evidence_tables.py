"""Run-report sections: the status ladder drawn per point, and every evidence table in a
readable form (summary and provenance transposed per run/point, JSON pretty-printed, the requests
table in full behind a <details>), and images embedded so the page opens offline on its own."""

from __future__ import annotations

import html
import json

import pandas as pd

from qualflow.evidence.schema import STATUS_LADDER, TABLES
from qualflow.report.markup import table_html

CSS = (
    ".ladder td.ok{background:#d6f0d6;color:#1b5e20;font-weight:bold}"
    ".ladder td.no{background:#f6f6f6;color:#999}"
    ".ladder td.at{outline:2px solid #1b7f2a}details{margin:.4em 0}pre.j{margin:0;font-size:11px;"
    "white-space:pre-wrap}"
    "table.kv td:first-child{font-family:monospace;white-space:nowrap}.scroll{max-height:480px;"
    "overflow:auto}"
)


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return ""
    if isinstance(v, str) and v[:1] in "{[":
        try:
            pretty = json.dumps(json.loads(v), indent=1, sort_keys=True)
            return f"<pre class='j'>{html.escape(pretty)}</pre>"
        except ValueError:
            pass
    if isinstance(v, float):
        return f"{v:.4g}"
    return html.escape(str(v))


def _kv(df: pd.DataFrame, label_cols: list[str], table: str) -> str:
    """One column per row of df (runs / points), one line per field, with the schema's
    description."""
    if df.empty:
        return "<p><i>none</i></p>"
    doc = TABLES[table]
    heads = [
        "<br>".join(html.escape(str(r.get(c))) for c in label_cols) for r in df.to_dict("records")
    ]
    rows = [
        "<table class='t kv'><tr><th>field</th>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr>"
    ]
    for c in df.columns:
        if c in label_cols or c == "schema_version":
            continue
        title = html.escape(doc.get(c, ""), quote=True)
        rows.append(
            f"<tr><td title='{title}'>{html.escape(c)}</td>"
            + "".join(f"<td>{_cell(v)}</td>" for v in df[c])
            + "</tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _plain(df: pd.DataFrame, drop=("schema_version", "software_key", "model", "profile")) -> str:
    if df.empty:
        return "<p><i>none</i></p>"
    return table_html(df[[c for c in df.columns if c not in drop]])


def ladder_html(status: pd.DataFrame) -> str:
    """The status ladder per model/profile/point: every step reached is green, the one it stopped at
    is outlined, and the reason it went no further is beside it."""
    if status.empty:
        return ""
    rows = [
        "<table class='t ladder'><tr><th>model/profile/point</th>"
        + "".join(f"<th>{s}</th>" for s in STATUS_LADDER)
        + "<th>why not further</th></tr>"
    ]
    for r in status.to_dict("records"):
        k = STATUS_LADDER.index(r["status"]) if r["status"] in STATUS_LADDER else -1
        cells = "".join(
            f"<td class='{'ok' if i <= k else 'no'}{' at' if i == k else ''}'>"
            f"{'&#10003; ' if i <= k else ''}{s}</td>"
            for i, s in enumerate(STATUS_LADDER)
        )
        rows.append(
            f"<tr><td>{html.escape(str(r['model']))}/{html.escape(str(r['profile']))}/"
            f"{html.escape(str(r['point_id']))}</td>{cells}"
            f"<td>{html.escape(str(r.get('status_reasons') or ''))}</td></tr>"
        )
    rows.append("</table>")
    return "<h2>Status ladder</h2>" + "".join(rows)


def evidence_sections(ev: dict[str, pd.DataFrame], max_requests: int = 2000) -> str:
    """Every evidence table, readable."""
    parts = [
        f"<style>{CSS}</style><h2>Evidence tables</h2><p>Hover a field name for its definition "
        "(src/qualflow/evidence/schema.py).</p>"
    ]
    summ, runs = ev.get("summary", pd.DataFrame()), ev.get("runs", pd.DataFrame())
    parts += [
        "<h3>summary (per run and workload point)</h3>",
        _kv(summ, ["run_id", "point_id"], "summary") if not summ.empty else "<p><i>none</i></p>",
    ]
    parts += [
        "<h3>runs (provenance)</h3>",
        _kv(runs, ["run_id", "point_id"], "runs") if not runs.empty else "<p><i>none</i></p>",
    ]
    corr = ev.get("correctness", pd.DataFrame())
    parts += [
        f"<h3>correctness ({len(corr)}"
        f" cases, {int(corr['passed'].astype(bool).sum()) if len(corr) else 0} passed)</h3>",
        f"<div class='scroll'>{_plain(corr)}</div>",
    ]
    proto = ev.get("protocol", pd.DataFrame())
    parts += [
        f"<h3>protocol ({len(proto)} checks)</h3>",
        f"<div class='scroll'>{_plain(proto)}</div>",
    ]
    req = ev.get("requests", pd.DataFrame())
    if not req.empty:
        cols = [
            "run_id",
            "request_id",
            "phase",
            "point_id",
            "is_warmup",
            "match_status",
            "client_ttft_ms",
            "client_itl_ms",
            "client_request_latency_ms",
            "public_task_call_wall_ms",
            "client_minus_task_wall_ms",
            "server_queue_wait_ms",
            "server_prefill_ms",
            "server_decode_ms",
            "server_input_tokens",
            "server_output_tokens",
            "finish_reason",
            "client_error",
            "server_error",
            "input_sha256",
        ]
        shown = req[[c for c in cols if c in req]].head(max_requests)
        more = (
            f" (first {max_requests} of {len(req)}; all {len(TABLES['requests'])} columns in "
            "requests.parquet)"
            if len(req) > max_requests
            else f" (key columns; all {len(TABLES['requests'])} in requests.parquet)"
        )
        parts += [
            f"<h3>requests ({len(req)} rows)</h3><details><summary>show the per-request table{more}"
            "</summary>"
            f"<div class='scroll'>{_plain(shown, drop=())}</div></details>"
        ]
    else:
        parts += ["<h3>requests</h3><p><i>none</i></p>"]
    return "\n".join(parts)
