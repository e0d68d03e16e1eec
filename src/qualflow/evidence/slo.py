"""Service-level objectives of a workload point, judged from the joined evidence, and the headline
figures of a point across its repeats (mean and a Student-t confidence interval).

The one vocabulary of SLO names (the config schema's `slo` block and the `targets` table use it):

- `ttft_ms`, `itl_ms`, `request_latency_ms` (client, AIPerf) and `task_call_wall_ms` (the server's
  `public_task_call_wall`): upper bounds on percentiles (`p50`, `p90`, `p99`) over a point's matched
  profiling requests, in ms;
- `min_output_tps`: lower bound on AIPerf's output token throughput (tokens/s);
- `max_error_rate`: upper bound on failed / sent profiling requests (0..1);
- `goodput`: lower bound `min_fraction` on the fraction of sent profiling requests that succeeded
  and met every per-request bound given beside it (`ttft_ms`, `itl_ms`, `request_latency_ms`; AIPerf
  computes the same with `--goodput`, recorded as `aiperf_goodput_fraction`).

Each figure is measured once per repeat (an own AIPerf run and run id); the verdict is on the mean
over repeats, and with two or more repeats the reason of a miss carries the 95% CI. A met SLO whose
CI reaches beyond its bound is flagged `marginal` (more repeats would tell)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from qualflow.evidence.schema import SUMMARY_PERCENTILES

# SLO name -> per-request evidence column (percentile bounds)
PERCENTILE_SLOS = {
    "ttft_ms": "client_ttft_ms",
    "itl_ms": "client_itl_ms",
    "request_latency_ms": "client_request_latency_ms",
    "task_call_wall_ms": "public_task_call_wall_ms",
}
# SLO name -> (summary column, direction, unit)
SCALAR_SLOS = {
    "min_output_tps": ("output_token_throughput_tps", ">=", " tok/s"),
    "max_error_rate": ("error_rate", "<=", ""),
    "goodput": ("goodput_fraction", ">=", ""),
}
SLO_NAMES = (*PERCENTILE_SLOS, *SCALAR_SLOS)
GOODPUT_BOUNDS = ("ttft_ms", "itl_ms", "request_latency_ms")  # per-request bounds of `goodput`
# headline figures of every point, SLO or not (summary columns), in reading order
HEADLINE = (
    "output_token_throughput_tps",
    "client_ttft_ms_p50",
    "client_ttft_ms_p99",
    "client_itl_ms_p50",
    "client_itl_ms_p99",
    "client_request_latency_ms_p50",
    "client_request_latency_ms_p99",
    "public_task_call_wall_ms_p50",
    "public_task_call_wall_ms_p99",
    "error_rate",
)
CI_LEVEL = 0.95
# two-sided 95% Student-t quantiles, df = 1..30
_T95 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


@dataclass(frozen=True)
class Bound:
    slo: str  # e.g. "ttft_ms.p50", "min_output_tps", "goodput.min_fraction"
    figure: str  # the summary column it bounds
    op: str  # "<=" or ">="
    value: float
    unit: str


def bounds(slo: dict | None) -> list[Bound]:
    """The bounds of one point's SLO block (schema-validated config), in SLO_NAMES order."""
    slo = slo or {}
    unknown = set(slo) - set(SLO_NAMES)
    if unknown:
        raise ValueError(f"unknown SLO names {sorted(unknown)} (known: {', '.join(SLO_NAMES)})")
    out = []
    for name, col in PERCENTILE_SLOS.items():
        for stat, v in sorted((slo.get(name) or {}).items()):
            if stat not in {f"p{q}" for q in SUMMARY_PERCENTILES}:
                raise ValueError(f"SLO {name}.{stat}: percentiles are {SUMMARY_PERCENTILES}")
            out.append(Bound(f"{name}.{stat}", f"{col}_{stat}", "<=", float(v), " ms"))
    for name, (col, op, unit) in SCALAR_SLOS.items():
        if name not in slo:
            continue
        v = slo[name]["min_fraction"] if name == "goodput" else slo[name]
        out.append(
            Bound(f"{name}.min_fraction" if name == "goodput" else name, col, op, float(v), unit)
        )
    return out


def goodput_bounds(slo: dict | None) -> dict:
    """The per-request bounds of a point's goodput SLO ({} without one)."""
    return {k: v for k, v in ((slo or {}).get("goodput") or {}).items() if k in GOODPUT_BOUNDS}


def goodput_fraction(
    profiling: pd.DataFrame, request_count: int, per_request: dict
) -> float | None:
    """Fraction of the sent profiling requests that succeeded and met every per-request bound."""
    if not per_request:
        return None
    ok = (
        profiling["client_error"].isna()
        & profiling["server_error"].isna()
        & (profiling["match_status"] != "server-only")
    )
    for name in GOODPUT_BOUNDS:
        if name in per_request:
            ok &= pd.to_numeric(profiling[PERCENTILE_SLOS[name]], errors="coerce") <= float(
                per_request[name]
            )
    return float(ok.sum()) / max(int(request_count), 1)


def mean_ci(values: list[float]) -> tuple[float | None, float | None, float | None]:
    """(mean, CI low, CI high); no CI below two values."""
    v = [float(x) for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not v:
        return None, None, None
    m = float(np.mean(v))
    if len(v) < 2:
        return m, None, None
    half = _T95[min(len(v) - 1, len(_T95)) - 1] * float(np.std(v, ddof=1)) / math.sqrt(len(v))
    return m, m - half, m + half


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4g}"


@dataclass
class Figure:
    """One figure of one point over its repeats, and the SLO verdict where a bound applies."""

    figure: str
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n_repeats: int
    values: list
    slo: str | None = None
    op: str | None = None
    bound: float | None = None
    met: bool | None = None
    marginal: bool | None = None
    reason: str | None = None

    def row(self) -> dict:
        d = asdict(self)
        d["values"] = json.dumps(self.values)
        d["ci_level"] = CI_LEVEL if self.ci_low is not None else None
        return d


def judge(b: Bound, values: list) -> Figure:
    m, lo, hi = mean_ci(values)
    n = len(values)
    f = Figure(b.figure, m, lo, hi, n, values, b.slo, b.op, b.value)
    if m is None:
        f.met, f.reason = (
            False,
            f"SLO {b.slo} ({b.figure} {b.op} {b.value:g}{b.unit}): not measured",
        )
        return f
    f.met = m <= b.value if b.op == "<=" else m >= b.value
    if lo is not None:
        worst = hi if b.op == "<=" else lo
        f.marginal = bool(f.met and not (worst <= b.value if b.op == "<=" else worst >= b.value))
    ci = f", {CI_LEVEL:.0%} CI [{_fmt(lo)}, {_fmt(hi)}] over {n} repeats" if lo is not None else ""
    if not f.met:
        f.reason = (
            f"SLO {b.slo} missed: {b.figure} {b.op} {b.value:g}{b.unit} required, measured "
            f"{_fmt(m)}{b.unit}{ci}"
        )
    return f


def evaluate(summary_rows: list[dict], slo: dict | None) -> tuple[list[Figure], list[str], bool]:
    """Figures of one point over its repeats' summary rows: the headline figures and every SLO
    bound. Returns (figures, reasons of the misses, whether any SLO is configured)."""
    bs = bounds(slo)
    by_fig = {b.figure: b for b in bs}
    figs = []
    for col in dict.fromkeys((*HEADLINE, *by_fig)):
        values = [r.get(col) for r in summary_rows]
        values = [
            None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
            for v in values
        ]
        if col in by_fig:
            figs.append(judge(by_fig[col], values))
        else:
            m, lo, hi = mean_ci(values)
            figs.append(Figure(col, m, lo, hi, len(values), values))
    return figs, [f.reason for f in figs if f.reason], bool(bs)


def max_load_meeting(runs: pd.DataFrame, summary: pd.DataFrame, top: str) -> pd.DataFrame:
    """Per run session, model, profile, workload and load kind: the highest load whose point reached
    `top` (every SLO holds), and the lowest load that did not (if any)."""
    cols = [
        "model",
        "profile",
        "workload",
        "load_kind",
        "max_load_meeting_slo",
        "first_load_missing",
        "loads",
    ]
    if runs.empty or summary.empty or "workload" not in summary:
        return pd.DataFrame(columns=cols)
    s = summary[summary.get("repeat", pd.Series(1, index=summary.index)).fillna(1).astype(int) == 1]
    st = runs.set_index(["run_id", "point_id"])["status"].to_dict()
    rows = []
    for (model, profile, wl, kind), g in s.groupby(
        ["model", "profile", "workload", "load_kind"], dropna=True
    ):
        g = g.assign(
            load=pd.to_numeric(
                g["concurrency"] if kind == "concurrency" else g["request_rate"], errors="coerce"
            )
        ).sort_values("load")
        met = [
            (ld, st.get((r, p)) == top) for ld, r, p in zip(g["load"], g["run_id"], g["point_id"])
        ]
        ok = [ld for ld, m in met if m]
        miss = [ld for ld, m in met if not m]
        rows.append(
            {
                "model": model,
                "profile": profile,
                "workload": wl,
                "load_kind": kind,
                "max_load_meeting_slo": max(ok) if ok else None,
                "first_load_missing": min(miss) if miss else None,
                "loads": ", ".join(f"{ld:g}" for ld, _ in met),
            }
        )
    return pd.DataFrame(rows, columns=cols)
