"""The run report's tables, computed from the evidence: the status of every run, client vs
server timing, start-up and stage times, protocol checks, correctness pass counts and request
accounting."""

from __future__ import annotations

import json

import pandas as pd

TIMING_COLUMNS = [
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
                "tool_calls": s.get("server_tool_calls"),
                "status_reasons": r["status_reasons"],
            }
        )
    return pd.DataFrame(rows)


def timing_table(summ: pd.DataFrame) -> pd.DataFrame:
    """Client vs server timing per point (p50, ms), the TIMING_COLUMNS the summary has."""
    return summ[[c for c in TIMING_COLUMNS if c in summ]] if not summ.empty else summ


def startup_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per run: load, start-up and warm-up times, and each stage's time (`stage:<name>`)."""
    return (
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


def protocol_rows(protocol: pd.DataFrame) -> pd.DataFrame:
    """Every protocol check: run, name, passed, detail."""
    return protocol[["run_id", "name", "passed", "detail"]] if not protocol.empty else protocol


def correctness_counts(corr: pd.DataFrame) -> pd.DataFrame:
    """Family correctness pass counts per run and criterion."""
    return (
        (
            corr.groupby(["run_id", "criterion"])["passed"]
            .agg(["sum", "count"])
            .reset_index()
            .rename(columns={"sum": "passed", "count": "cases"})
        )
        if not corr.empty
        else corr
    )


def request_accounting(req: pd.DataFrame) -> pd.DataFrame:
    """Requests per run, phase and match status."""
    return (
        req.groupby(["run_id", "phase", "match_status"]).size().reset_index(name="requests")
        if not req.empty
        else req
    )
