"""One `summary` row per AIPerf run of a point: the request accounting, the AIPerf verdict and its
summary figures, and the latency percentiles over the point's samples (evidence.samples: matched
requests, or an endpoint's client-only ones)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from qualflow.aiperf.command import AiperfPoint
from qualflow.aiperf.record import PointRun
from qualflow.evidence import slo as slo_mod
from qualflow.evidence.cache import cache_figures
from qualflow.evidence.samples import sample_rows
from qualflow.evidence.schema import REASONING_METRICS, SUMMARY_METRICS, SUMMARY_PERCENTILES


def _pct(s: pd.Series, q: float):
    s = pd.to_numeric(s, errors="coerce").dropna()
    return None if s.empty else float(np.percentile(s, q))


def _accounting(req: pd.DataFrame, point: AiperfPoint) -> dict:
    """Client and server records of the point's profiling requests, each once; errors; the OSL."""
    pid = point.point_id
    mine = req[(req["point_id"] == pid) & (req["phase"] == "profiling")]
    matched = mine[mine["match_status"] == "matched"]
    err = mine["client_error"].notna() | mine["server_error"].notna()
    exact_osl = point.ignore_eos and not point.osl_stddev
    srv_osl = pd.to_numeric(matched["server_output_tokens"], errors="coerce")
    of_point = req[req["point_id"] == pid]
    return {
        "n_client": int((mine["match_status"] != "server-only").sum()),
        "n_server": int((mine["match_status"] != "client-only").sum()),
        "n_matched": len(matched),
        "n_client_only": int((mine["match_status"] == "client-only").sum()),
        "n_server_only": int((of_point["match_status"] == "server-only").sum()),
        "duplicate_request_ids": ", ".join(
            sorted(
                set(
                    of_point[of_point["duplicate_request_id"].astype(bool)]["request_id"].astype(
                        str
                    )
                )
            )
        )
        or None,
        "n_errors": int(err.sum()),
        "n_server_osl_mismatch": int((srv_osl != point.osl).sum()) if exact_osl else 0,
        "n_warmup_excluded": int((of_point["is_warmup"].astype(bool)).sum()),
        "error_rate": float(err.sum()) / max(int(point.request_count), 1),
    }


def _aiperf_figures(point: AiperfPoint, summary_json: dict | None) -> dict:
    """AIPerf's own summary figures (profile_export_aiperf.json)."""
    if not summary_json:
        return {}

    def avg(tag):
        b = summary_json.get(tag)
        return b.get("avg") if isinstance(b, dict) else None

    good = avg("good_request_count")
    return {
        "benchmark_duration_s": avg("benchmark_duration"),
        "request_throughput_rps": avg("request_throughput"),
        "output_token_throughput_tps": avg("output_token_throughput"),
        "aiperf_goodput_fraction": None
        if good is None or not point.goodput
        else float(good) / max(int(point.request_count), 1),
    }


def _total(samples: pd.DataFrame, col: str) -> int | None:
    """The sum of a count column over the samples; None where no sample has one."""
    vals = pd.to_numeric(samples[col], errors="coerce").dropna() if col in samples else None
    return None if vals is None or vals.empty else int(vals.sum())


def summarize_point(
    req: pd.DataFrame,
    point: AiperfPoint,
    run: PointRun | None,
    summary_json: dict | None,
    goodput: dict | None = None,
    payloads_sha: str | None = None,
    server_timing: bool = True,
) -> dict:
    """The summary row of one AIPerf run (`req`: that run's requests; `run`: its run.json, None when
    AIPerf never recorded one; `server_timing`: False for an endpoint, whose samples are its
    client-only rows)."""
    pid = point.point_id
    mine = req[(req["point_id"] == pid) & (req["phase"] == "profiling")]
    samples = sample_rows(mine, () if server_timing else set(mine["run_id"].astype(str)))
    verdict = run.verdict if run else None
    rate = point.request_rate
    row = {
        "point_id": pid,
        "workload": point.workload,
        "concurrency": point.concurrency,
        "load_kind": "concurrency" if rate is None else "request_rate",
        "request_rate": rate,
        "arrival_pattern": point.arrival_pattern if rate is not None else None,
        "isl": point.isl,
        "osl": point.osl,
        "request_count": point.request_count,
        **_accounting(req, point),
        "aiperf_warnings": "; ".join(verdict.warnings if verdict else []) or None,
        "aiperf_ok": bool(verdict.ok) if verdict else False,
        "aiperf_reasons": "; ".join(verdict.reasons if verdict else []) or None,
        "dataset_sha256": run.dataset_sha256 if run else None,
        "input_file_sha256": run.input_file_sha256 if run else None,
        "goodput_fraction": slo_mod.goodput_fraction(mine, point.request_count, goodput or {}),
        "payloads_sha256": payloads_sha,
        **_aiperf_figures(point, summary_json),
        **cache_figures(samples, summary_json),
        "reasoning_effort": (point.reasoning or {}).get("effort"),
        "server_tool_calls": _total(samples, "server_tool_calls"),
    }
    for m in SUMMARY_METRICS + REASONING_METRICS:
        vals = (
            pd.to_numeric(samples[m], errors="coerce") if m in samples else pd.Series(dtype=float)
        )
        row[f"{m}_mean"] = None if vals.dropna().empty else float(vals.mean())
        for q in SUMMARY_PERCENTILES:
            row[f"{m}_p{q}"] = _pct(vals, q)
    return row
