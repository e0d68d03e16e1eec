"""`qualflow compare`: the evidence of two runs (or software versions) side by side, for every common
model/profile/workload point, with a verdict on whether each delta is beyond run-to-run noise.

Method (also stated on the page): the statistics are in `compare_stats` (BCa bootstrap per test,
Benjamini-Hochberg over every test of the comparison, resamples scaled to the corrected level), the
comparability of runs and the run-to-run noise in `compare_noise` (pools of comparable runs: same
dataset, workload, server settings and status). This module joins them over the evidence store:
per-request rows are the profiling requests matched on both sides (warm-up excluded); per-request
output tokens/s is the server's output token count over the client request latency.

Two runs are comparable only with the same dataset identity, workload settings and server settings
per point; otherwise compare refuses, unless forced (the page then says so at the top).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from qualflow.evidence import store
from qualflow.evidence.compare_noise import (Pools, comparability_problems, fingerprint, merged_spread, parse_json,
                                             server_settings)
from qualflow.evidence.compare_stacks import (CROSS_VERSION, client_only_runs, comparison_kind, point_key,
                                              profiling_rows, protocol_matrix)
from qualflow.evidence.compare_stats import (INCONCLUSIVE, METRICS, STATS, CompareOptions, bootstrap_delta,  # noqa: F401
                                             compare_samples, is_tested, judge, judge_family, mann_whitney_p,
                                             metric_rows, min_n, noise_floor, resamples_for)

METHOD_TEXT = (
    "Deltas are head - base. Each test (point, metric, percentile; a percentile only when each side has >= 8 "
    "requests beyond it: p50 >= 16, p90 >= 80, p99 >= 800 requests) is a BCa bootstrap (scipy.stats.bootstrap) "
    "of the difference of the statistic, resampling each run's per-request rows (matched profiling requests, "
    "warm-up excluded) independently, seed {seed}, with its p-value from inverting the BCa interval. The "
    "family is every test of this comparison, across points and within each: Benjamini-Hochberg at a false "
    "discovery rate of {fdr:.0%} selects the tests, and every CI is shown at the matching FCR-adjusted level "
    "(the Bonferroni level when nothing is selected); the resample count is scaled to that level "
    "(>= {tail} resamples beyond each end). Within-run resampling cannot see run-to-run noise, so a delta "
    "is significant only if its CI excludes 0 AND |delta| exceeds the noise floor AND that floor means "
    "something: run-to-run noise measured on both sides (>= 2 comparable runs each: same version, dataset, "
    "workload, server settings and status; repeats or history), its floor being the largest spread "
    "(max - min) of the statistic across either side's comparable runs, or a floor configured ({floor}). "
    "Otherwise a CI that excludes 0 reads '" + INCONCLUSIVE + "'. The Mann-Whitney U p-value (two-sided, "
    "whole distributions) is a second opinion only. Per-request output tokens/s is the server's output "
    "token count over the client request latency. Aggregate AIPerf output tokens/s is one number per run, "
    "shown without a test.")


def method_text(o: CompareOptions) -> str:
    floor = ("configured: " + ", ".join(x for x in (
        f"{o.noise_rel:.0%} of base" if o.noise_rel is not None else "",
        f"{o.noise_abs_ms:g} ms for ms metrics" if o.noise_abs_ms is not None else "") if x)
             if o.floor_configured else "none configured")
    from qualflow.evidence.compare_stats import TAIL_RESAMPLES
    return METHOD_TEXT.format(seed=o.seed, fdr=1 - o.confidence, tail=TAIL_RESAMPLES, floor=floor)


class CompareRefused(ValueError):
    """The two runs are not comparable (dataset, workload or server settings differ) and --force was not given."""


@dataclass
class Comparison:
    base: str
    head: str
    metrics: pd.DataFrame
    points: pd.DataFrame
    provenance: pd.DataFrame
    only_in: pd.DataFrame
    problems: list[str] = field(default_factory=list)   # comparability problems (only when forced)
    samples: dict = field(default_factory=dict)         # (model, profile, point) -> {side: {metric: array}}
    options: CompareOptions = field(default_factory=CompareOptions)
    notes: list[str] = field(default_factory=list)      # what could not be checked (e.g. unknown server settings)
    kind: str = CROSS_VERSION                            # cross-version | cross-stack (compare_stacks)
    kind_detail: str = ""
    protocol: pd.DataFrame = field(default_factory=pd.DataFrame)   # protocol checks side by side, per pair


# ---------------------------------------------------------------- evidence -> samples

def _matched_profiling(req: pd.DataFrame, client_only: set[str] = frozenset()) -> pd.DataFrame:
    """Matched profiling rows (warm-up excluded); for runs in `client_only` (no server timing), their
    client-only rows without an error."""
    if req.empty:
        return req
    r = profiling_rows(req, set(client_only))
    lat = pd.to_numeric(r["client_request_latency_ms"], errors="coerce")
    # the server's count: the client-tokenized OSL re-tokenizes the text and need not match
    out = pd.to_numeric(r["server_output_tokens"], errors="coerce") if "server_output_tokens" in r \
        else pd.Series(np.nan, index=r.index)
    r["output_tps_per_request"] = out / (lat / 1000.0)
    return r


def point_samples(req: pd.DataFrame, run_id: str, point_id: str) -> dict[str, np.ndarray]:
    if req.empty:
        return {m: np.empty(0) for m, *_ in METRICS}
    r = req[(req["run_id"] == run_id) & (req["point_id"] == point_id)]
    return {m: pd.to_numeric(r[m], errors="coerce").dropna().to_numpy(dtype=float) for m, *_ in METRICS}


def _samples_of(ev: dict, run_id: str, point_id: str) -> dict[str, np.ndarray]:
    return point_samples(_matched_profiling(ev["requests"], client_only_runs(ev["runs"])), run_id, point_id)


def _flat(prefix: str, v) -> dict:
    v = parse_json(v)
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            out.update(_flat(f"{prefix}.{k}", x))
        return out
    if isinstance(v, list):
        return {prefix: json.dumps(v, sort_keys=True, default=str)}
    return {prefix: None if v is None else str(v)}


PROV_FIELDS = ("software_key", "qualflow_version", "git_sha", "git_dirty", "python", "os", "hardware", "packages",
               "checkpoint", "checkpoint_revision", "bundle_hash", "device", "precision", "context_limit",
               "generation_config", "endpoint", "streaming", "server_settings")


def _provenance_row(runs: pd.DataFrame, corr: pd.DataFrame, run_id: str) -> dict:
    r = runs[runs["run_id"] == run_id]
    out: dict = {}
    if len(r):
        x = r.iloc[0].to_dict()
        for f in PROV_FIELDS:
            if f in ("hardware", "packages", "generation_config"):
                out.update(_flat(f, x.get(f)))
            elif f == "server_settings":
                ss = server_settings(x)
                out.update({"server_settings": "unknown (not recorded)"} if ss is None else
                           {"server_settings": "recorded", **_flat(f, ss)})
            elif f == "endpoint":
                continue  # the port differs every session; not a provenance difference
            else:
                v = x.get(f)
                out[f] = None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)
    c = corr[corr["run_id"] == run_id] if not corr.empty else corr
    tv = sorted(set(c["thresholds_version"].dropna().astype(str))) if len(c) else []
    out["thresholds_version"] = ", ".join(tv) or None
    return out


def _pass_count(df: pd.DataFrame, run_id: str) -> tuple[int, int]:
    if df.empty:
        return 0, 0
    d = df[df["run_id"] == run_id]
    return int(d["passed"].astype(bool).sum()), len(d)


def _summary_row(ev, run_id, point_id) -> dict:
    s = ev["summary"]
    s = s[(s["run_id"] == run_id) & (s["point_id"] == point_id)] if not s.empty else s
    return s.iloc[0].to_dict() if len(s) else {}


def _points_of(refs, ev, key=lambda r, point_id: (r.model, r.profile, point_id)) -> dict:
    out = {}
    runs = ev["runs"]
    for r in refs:
        for x in runs[runs["run_id"] == r.run_id].to_dict("records"):
            out[key(r, x["point_id"])] = (r, x)
    return out


def _point_row(key, rb, xb, rh, xh, sb, sh, fb, fh, ev_b, ev_h, pool_b, pool_h) -> dict:
    cb, ch = _pass_count(ev_b["correctness"], rb.run_id), _pass_count(ev_h["correctness"], rh.run_id)
    qb, qh = _pass_count(ev_b["protocol"], rb.run_id), _pass_count(ev_h["protocol"], rh.run_id)
    ss_b, ss_h = server_settings(xb), server_settings(xh)
    return {
        "model": key[0], "profile": key[1], "point_id": key[2],
        "base_noise_runs": len(pool_b) - 1, "head_noise_runs": len(pool_h) - 1,
        "base_comparable_runs": ", ".join(r.run_id for r in pool_b),
        "head_comparable_runs": ", ".join(r.run_id for r in pool_h),
        "noise_measured": len(pool_b) >= 2 and len(pool_h) >= 2,
        "base_run": rb.label, "head_run": rh.label,
        "base_status": xb.get("status"), "head_status": xh.get("status"),
        "status_changed": xb.get("status") != xh.get("status"),
        "base_correctness_passed": cb[0], "base_correctness_cases": cb[1],
        "head_correctness_passed": ch[0], "head_correctness_cases": ch[1],
        "base_protocol_passed": qb[0], "base_protocol_checks": qb[1],
        "head_protocol_passed": qh[0], "head_protocol_checks": qh[1],
        "base_output_tps": sb.get("output_token_throughput_tps"),
        "head_output_tps": sh.get("output_token_throughput_tps"),
        "base_n": sb.get("n_matched"), "head_n": sh.get("n_matched"),
        "dataset_sha256_base": fb.dataset_sha256, "dataset_sha256_head": fh.dataset_sha256,
        "dataset_equal": bool(fb.dataset_sha256 and fb.dataset_sha256 == fh.dataset_sha256),
        "workload_equal": fb.workload == fh.workload,
        "server_settings_equal": (None if ss_b is None or ss_h is None else ss_b == ss_h),
    }


def _aggregate_row(key, sb, sh, rb, rh) -> dict | None:
    bt, ht = sb.get("output_token_throughput_tps"), sh.get("output_token_throughput_tps")
    if bt is None or ht is None or not np.isfinite([bt, ht]).all():
        return None
    return {"model": key[0], "profile": key[1], "point_id": key[2], "metric": "output_token_throughput_tps",
            "label": "output tokens/s (AIPerf aggregate)", "unit": "tok/s", "lower_is_better": False,
            "stat": "aggregate", "base": float(bt), "head": float(ht), "delta": float(ht - bt),
            "rel_delta": float((ht - bt) / bt) if bt else float("nan"),
            "n_base": sb.get("n_matched"), "n_head": sh.get("n_matched"), "mw_p": float("nan"),
            "p_value": float("nan"), "q_value": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"),
            "ci_level": float("nan"), "resamples": 0, "noise_floor": float("nan"), "noise_floor_empirical_rel": 0.0,
            "noise_measured": False, "floor_configured": False, "tests_in_family": 0, "tested": False,
            "significant": False, "verdict": "not tested (one value per run)",
            "base_run": rb.label, "head_run": rh.label}


def compare_evidence(base_refs: list[store.RunRef], head_refs: list[store.RunRef], *, base: str, head: str,
                     opts: CompareOptions | None = None, root=None) -> Comparison:
    opts = opts or CompareOptions()
    ev_b, ev_h = store.load(base_refs), store.load(head_refs)
    req_b = _matched_profiling(ev_b["requests"], client_only_runs(ev_b["runs"]))
    req_h = _matched_profiling(ev_h["requests"], client_only_runs(ev_h["runs"]))
    kind = comparison_kind(base_refs, head_refs, ev_b["runs"], ev_h["runs"])

    def key(r, point_id):
        return point_key(r, point_id, kind, base_refs, head_refs)
    pb, ph = _points_of(base_refs, ev_b, key), _points_of(head_refs, ev_h, key)
    common = sorted(set(pb) & set(ph))
    only = [{"model": k[0], "profile": k[1], "point_id": k[2], "only_in": "base", "run_id": pb[k][0].run_id}
            for k in sorted(set(pb) - set(ph))]
    only += [{"model": k[0], "profile": k[1], "point_id": k[2], "only_in": "head", "run_id": ph[k][0].run_id}
             for k in sorted(set(ph) - set(pb))]
    if not common:
        raise CompareRefused(f"base {base!r} and head {head!r} have no model/profile/workload point in common "
                             f"(base: {sorted(pb) or 'none'}; head: {sorted(ph) or 'none'})")

    pools = Pools(root, _samples_of)
    problems, notes, point_rows, pending, samples = [], [], [], [], {}
    for key in common:
        (rb, xb), (rh, xh) = pb[key], ph[key]
        sb, sh = _summary_row(ev_b, rb.run_id, key[2]), _summary_row(ev_h, rh.run_id, key[2])
        fb, fh = fingerprint(xb, sb), fingerprint(xh, sh)
        p, n = comparability_problems("/".join(key), fb, fh, xb, xh, settings_may_differ=kind.cross_stack)
        problems += p
        notes += n
        pool_b, pool_h = pools.pool(rb, key[2], fb), pools.pool(rh, key[2], fh)
        point_rows.append(_point_row(key, rb, xb, rh, xh, sb, sh, fb, fh, ev_b, ev_h, pool_b, pool_h))
        samples[key] = {"base": point_samples(req_b, rb.run_id, key[2]), "head": point_samples(req_h, rh.run_id, key[2])}
        spread = merged_spread(pools.spread(pool_b, key[2]), pools.spread(pool_h, key[2]))
        pending.append((key, rb, rh, sb, sh, spread, point_rows[-1]["noise_measured"]))
    if problems and not opts.force:
        raise CompareRefused("refusing to compare: the runs are not comparable:\n  " + "\n  ".join(problems)
                             + "\n(pass --force to compare anyway; the page will say so at the top)")

    # one family of tests over every point: the resample count is scaled to its most stringent level
    m = sum(is_tested(len(samples[k]["base"][mt]), len(samples[k]["head"][mt]), q)
            for k, *_ in pending for mt, *_ in METRICS for _, q in STATS)
    B = resamples_for((1 - opts.confidence) / max(m, 1), opts.resamples)
    rows, aggregates = [], []
    for key, rb, rh, sb, sh, spread, measured in pending:
        for mt, lab, unit, lower in METRICS:
            for row in metric_rows(samples[key]["base"][mt], samples[key]["head"][mt], unit=unit,
                                   lower_is_better=lower, opts=opts, resamples=B, empirical_rel=spread.get(mt),
                                   noise_measured=measured):
                rows.append({"model": key[0], "profile": key[1], "point_id": key[2], "metric": mt, "label": lab,
                             **row, "base_run": rb.label, "head_run": rh.label})
        agg = _aggregate_row(key, sb, sh, rb, rh)
        if agg:
            aggregates.append(agg)
    rows = judge_family(rows, opts)
    metric_df = pd.DataFrame(rows + aggregates)
    if len(metric_df):   # points together, as before: each point's metrics then its aggregate
        order = {k: i for i, k in enumerate(common)}
        metric_df["_o"] = [order[(r["model"], r["profile"], r["point_id"])] for r in metric_df.to_dict("records")]
        metric_df = metric_df.sort_values("_o", kind="stable").drop(columns="_o").reset_index(drop=True)

    prov_rows, matrices = [], []
    for mp in sorted({(k[0], k[1]) for k in common}):
        rb = next(pb[k][0] for k in common if k[:2] == mp)
        rh = next(ph[k][0] for k in common if k[:2] == mp)
        mx = protocol_matrix(ev_b["protocol"], rb.run_id, ev_h["protocol"], rh.run_id)
        mx.insert(0, "pair", f"{mp[0]}/{mp[1]}")
        matrices.append(mx)
        vb = _provenance_row(ev_b["runs"], ev_b["correctness"], rb.run_id)
        vh = _provenance_row(ev_h["runs"], ev_h["correctness"], rh.run_id)
        for f in sorted(set(vb) | set(vh)):
            prov_rows.append({"model": mp[0], "profile": mp[1], "field": f, "base": vb.get(f), "head": vh.get(f),
                              "differs": vb.get(f) != vh.get(f)})
        for k in [k for k in common if k[:2] == mp]:
            pr = next(p for p in point_rows if (p["model"], p["profile"], p["point_id"]) == k)
            prov_rows.append({"model": mp[0], "profile": mp[1], "field": f"dataset_sha256[{k[2]}]",
                              "base": pr["dataset_sha256_base"], "head": pr["dataset_sha256_head"],
                              "differs": not pr["dataset_equal"]})
    return Comparison(base=base, head=head, metrics=metric_df, points=pd.DataFrame(point_rows),
                      provenance=pd.DataFrame(prov_rows, columns=["model", "profile", "field", "base", "head", "differs"]),
                      only_in=pd.DataFrame(only, columns=["model", "profile", "point_id", "only_in", "run_id"]),
                      problems=problems, samples=samples, options=opts, notes=notes, kind=kind.kind,
                      kind_detail=kind.detail, protocol=pd.concat(matrices, ignore_index=True) if matrices
                      else pd.DataFrame())
