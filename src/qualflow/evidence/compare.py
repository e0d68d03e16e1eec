"""`qualflow compare`: the evidence of two runs (or software versions) side by side, for every common
model/profile/workload point, with a verdict on whether each delta is beyond run-to-run noise.

Statistical method (also stated on the page):

* Per-request rows only: profiling requests matched on both sides (warm-up excluded), per point.
* For each metric and statistic (p50, p90, p99) the delta is
  head - base. Its uncertainty is a **percentile bootstrap** confidence interval (default 95 %,
  2000 resamples, fixed seed): both runs' requests are resampled independently with replacement and
  the statistic's difference recomputed. The level is Bonferroni-adjusted over the k tests of a point
  (each CI at 1 - 0.05/k), so a point's whole family of tests keeps 95 % confidence. A quantile's CI from a bootstrap needs no distributional
  assumption (latencies are skewed and multi-modal), and the CI is about the very number the table
  shows. The two-sided **Mann-Whitney U** p-value (scipy) over the whole distributions is shown next
  to it as a second opinion, not as the criterion.
* Within-run resampling sees only request-to-request noise. Run-to-run noise (another process on the
  host, CPU frequency, ...) is not in it, so a delta is only called *significant* when the CI
  excludes zero **and** the delta is larger than a noise floor: max(--noise-rel x |base|,
  --noise-abs-ms, and the largest relative difference seen between runs of the base version itself
  when its history holds more than one run for that model/profile/point).
* Two runs are comparable only with the same dataset identity (AIPerf inputs.json sha256) and the
  same workload settings per point; otherwise compare refuses, unless forced (the page then says so
  at the top).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from qualflow.evidence import store

# (requests column, label, unit, lower is better)
METRICS = (
    ("client_ttft_ms", "TTFT", "ms", True),
    ("client_itl_ms", "ITL", "ms", True),
    ("client_request_latency_ms", "request latency", "ms", True),
    ("client_minus_task_wall_ms", "client - task-call gap", "ms", True),
    ("output_tps_per_request", "output tokens/s per request", "tok/s", False),
)
STATS = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0))
TAIL_MIN = 8   # a percentile is tested only with >= 8 requests beyond it per side: n >= 8 / (1 - q)


def min_n(q: float) -> int:
    """Requests per side needed to test percentile q (p50: 16, p90: 80, p99: 800): a bootstrap of a
    quantile with fewer samples beyond it resamples the same few extreme values and its CI is too narrow."""
    return int(np.ceil(TAIL_MIN / (1 - q / 100) - 1e-9))

METHOD_TEXT = (
    "Deltas are head - base. Significance: percentile bootstrap CI of the difference of the statistic "
    "(a percentile only when each side has >= 8 requests beyond it: p50 >= 16, p90 >= 80, p99 >= 800 requests), "
    "resampling each run's per-request rows "
    "(matched profiling requests, warm-up excluded) independently, {B} resamples, seed {seed}; the CI level is "
    "Bonferroni-adjusted over the tests of a point, so each point's family of tests holds {conf:.0%} "
    "confidence. A delta is significant only if the CI excludes 0 AND |delta| exceeds the noise floor "
    "max({rel:.0%} of base, {abs_ms} ms for ms metrics, the largest relative difference between earlier "
    "runs of the base version when its history has them, the head run excluded), because within-run resampling cannot see "
    "run-to-run noise. The Mann-Whitney U p-value (two-sided, whole distributions, scipy) is shown as a "
    "second opinion only. Aggregate AIPerf output tokens/s is one number per run (no within-run "
    "spread), so it is shown without a test; the per-request output rate (output tokens / request "
    "latency) is tested instead.")


class CompareRefused(ValueError):
    """The two runs are not comparable (dataset identity or workload differ) and --force was not given."""


@dataclass
class CompareOptions:
    confidence: float = 0.95
    resamples: int = 2000
    seed: int = 0
    noise_rel: float = 0.10
    noise_abs_ms: float = 2.0
    force: bool = False


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


# ---------------------------------------------------------------- statistics (pure, unit-tested)

def bootstrap_delta(base, head, q: float, *, resamples: int = 2000, confidence: float = 0.95,
                    seed: int = 0) -> tuple[float, float, float]:
    """(delta, ci_low, ci_high) of percentile q: head - base, percentile bootstrap."""
    b = np.asarray(base, dtype=float)
    h = np.asarray(head, dtype=float)
    b, h = b[~np.isnan(b)], h[~np.isnan(h)]
    if len(b) < 2 or len(h) < 2:
        return (float("nan"),) * 3
    delta = float(np.percentile(h, q) - np.percentile(b, q))
    rng = np.random.default_rng(seed)
    diffs = np.empty(resamples)
    chunk = max(1, 2_000_000 // max(len(b), len(h)))
    for s in range(0, resamples, chunk):
        k = min(chunk, resamples - s)
        bb = np.percentile(b[rng.integers(0, len(b), (k, len(b)))], q, axis=1)
        hh = np.percentile(h[rng.integers(0, len(h), (k, len(h)))], q, axis=1)
        diffs[s:s + k] = hh - bb
    a = (1 - confidence) / 2
    lo, hi = np.percentile(diffs, [100 * a, 100 * (1 - a)])
    return delta, float(lo), float(hi)


def mann_whitney_p(base, head) -> float:
    from scipy.stats import mannwhitneyu
    b = np.asarray(base, dtype=float)
    h = np.asarray(head, dtype=float)
    b, h = b[~np.isnan(b)], h[~np.isnan(h)]
    if len(b) < 2 or len(h) < 2:
        return float("nan")
    if np.all(b == b[0]) and np.all(h == h[0]) and b[0] == h[0]:
        return 1.0
    return float(mannwhitneyu(h, b, alternative="two-sided").pvalue)


def noise_floor(base_value: float, unit: str, opts: CompareOptions, empirical_rel: float = 0.0) -> float:
    floor = max(opts.noise_rel, empirical_rel) * abs(base_value) if np.isfinite(base_value) else 0.0
    if unit == "ms":
        floor = max(floor, opts.noise_abs_ms)
    return float(floor)


def judge(delta: float, lo: float, hi: float, floor: float) -> bool:
    if not all(np.isfinite([delta, lo, hi])):
        return False
    return bool((lo > 0 or hi < 0) and abs(delta) > floor)


def compare_samples(base, head, *, unit: str, lower_is_better: bool, opts: CompareOptions,
                    empirical_rel: dict[str, float] | None = None) -> list[dict]:
    """One row per statistic for one metric of one point."""
    b = np.asarray(base, dtype=float)
    h = np.asarray(head, dtype=float)
    b, h = b[~np.isnan(b)], h[~np.isnan(h)]
    p = mann_whitney_p(b, h)
    rows = []
    for stat, q in STATS:
        bv = float(np.percentile(b, q)) if len(b) else float("nan")
        hv = float(np.percentile(h, q)) if len(h) else float("nan")
        row = {"stat": stat, "base": bv, "head": hv, "delta": hv - bv,
               "rel_delta": (hv - bv) / abs(bv) if bv else float("nan"),
               "n_base": len(b), "n_head": len(h), "mw_p": p}
        tested = min(len(b), len(h)) >= max(2, min_n(q))
        emp = (empirical_rel or {}).get(stat, 0.0)
        floor = noise_floor(bv, unit, opts, emp)
        if tested:
            _, lo, hi = bootstrap_delta(b, h, q, resamples=opts.resamples, confidence=opts.confidence,
                                        seed=opts.seed)
            sig = judge(row["delta"], lo, hi, floor)
        else:
            lo = hi = float("nan")
            sig = False
        worse = (row["delta"] > 0) == lower_is_better
        row.update({"ci_low": lo, "ci_high": hi, "noise_floor": floor, "noise_floor_empirical_rel": emp,
                    "tested": tested, "significant": sig,
                    "verdict": ("regression" if worse else "improvement") if sig else
                               ("not tested" if not tested else "within noise")})
        rows.append(row)
    return rows


# ---------------------------------------------------------------- evidence -> samples

def _matched_profiling(req: pd.DataFrame) -> pd.DataFrame:
    if req.empty:
        return req
    r = req[(req["phase"] == "profiling") & (req["match_status"] == "matched")
            & ~req["is_warmup"].fillna(False).astype(bool)].copy()
    lat = pd.to_numeric(r["client_request_latency_ms"], errors="coerce")
    osl = pd.to_numeric(r["client_osl"], errors="coerce")
    r["output_tps_per_request"] = osl / (lat / 1000.0)
    return r


def point_samples(req: pd.DataFrame, run_id: str, point_id: str) -> dict[str, np.ndarray]:
    r = req[(req["run_id"] == run_id) & (req["point_id"] == point_id)]
    return {m: pd.to_numeric(r[m], errors="coerce").dropna().to_numpy(dtype=float) for m, *_ in METRICS}


def _json(v):
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    try:
        return json.loads(v) if isinstance(v, str) else v
    except ValueError:
        return v


def _flat(prefix: str, v) -> dict:
    v = _json(v)
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
               "generation_config", "endpoint", "streaming")


def _provenance_row(runs: pd.DataFrame, corr: pd.DataFrame, run_id: str) -> dict:
    r = runs[runs["run_id"] == run_id]
    out: dict = {}
    if len(r):
        x = r.iloc[0].to_dict()
        for f in PROV_FIELDS:
            if f in ("hardware", "packages", "generation_config"):
                out.update(_flat(f, x.get(f)))
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


def _empirical_noise(root, ref: store.RunRef, point_id: str, exclude: tuple[str, ...] = ()) -> dict[str, dict[str, float]]:
    """Largest relative difference of each metric/stat between `ref` and the other runs of the same
    version/model/profile (the base version's own run-to-run noise), {metric: {stat: rel}}."""
    if root is None:
        return {}
    others = [r for r in store.list_runs(root) if (r.version, r.model, r.profile) == (ref.version, ref.model, ref.profile)
              and r.run_id != ref.run_id and r.run_id not in exclude]
    if not others:
        return {}
    base = point_samples(_matched_profiling(store.load([ref])["requests"]), ref.run_id, point_id)
    out: dict[str, dict[str, float]] = {}
    for o in others:
        req = _matched_profiling(store.load([o])["requests"])
        if req.empty:
            continue
        s = point_samples(req, o.run_id, point_id)
        for m, *_ in METRICS:
            if not len(base[m]) or not len(s[m]):
                continue
            for stat, q in STATS:
                bv, ov = np.percentile(base[m], q), np.percentile(s[m], q)
                if bv:
                    rel = abs(ov - bv) / abs(bv)
                    out.setdefault(m, {})[stat] = max(out.get(m, {}).get(stat, 0.0), float(rel))
    return out


def compare_evidence(base_refs: list[store.RunRef], head_refs: list[store.RunRef], *, base: str, head: str,
                     opts: CompareOptions | None = None, root=None) -> Comparison:
    opts = opts or CompareOptions()
    ev_b, ev_h = store.load(base_refs), store.load(head_refs)
    req_b, req_h = _matched_profiling(ev_b["requests"]), _matched_profiling(ev_h["requests"])

    def points_of(refs, ev):
        out = {}
        runs = ev["runs"]
        for r in refs:
            for x in runs[runs["run_id"] == r.run_id].to_dict("records"):
                out[(r.model, r.profile, x["point_id"])] = (r, x)
        return out

    pb, ph = points_of(base_refs, ev_b), points_of(head_refs, ev_h)
    common = sorted(set(pb) & set(ph))
    only = [{"model": k[0], "profile": k[1], "point_id": k[2], "only_in": "base", "run_id": pb[k][0].run_id}
            for k in sorted(set(pb) - set(ph))]
    only += [{"model": k[0], "profile": k[1], "point_id": k[2], "only_in": "head", "run_id": ph[k][0].run_id}
             for k in sorted(set(ph) - set(pb))]
    if not common:
        raise CompareRefused(f"base {base!r} and head {head!r} have no model/profile/workload point in common "
                             f"(base: {sorted(pb) or 'none'}; head: {sorted(ph) or 'none'})")

    def summ_row(ev, run_id, point_id):
        s = ev["summary"]
        s = s[(s["run_id"] == run_id) & (s["point_id"] == point_id)] if not s.empty else s
        return s.iloc[0].to_dict() if len(s) else {}

    problems, point_rows, metric_rows, samples = [], [], [], {}
    for key in common:
        (rb, xb), (rh, xh) = pb[key], ph[key]
        sb, sh = summ_row(ev_b, rb.run_id, key[2]), summ_row(ev_h, rh.run_id, key[2])
        ds_b = sb.get("dataset_sha256") or xb.get("dataset_sha256")
        ds_h = sh.get("dataset_sha256") or xh.get("dataset_sha256")
        wl_b, wl_h = _json(xb.get("workload")) or {}, _json(xh.get("workload")) or {}
        label = "/".join(key)
        if not ds_b or not ds_h or ds_b != ds_h:
            problems.append(f"{label}: dataset identity differs (AIPerf inputs.json sha256 base {ds_b or 'unknown'}"
                            f", head {ds_h or 'unknown'})")
        if wl_b != wl_h:
            diff = sorted(k for k in set(wl_b) | set(wl_h) if wl_b.get(k) != wl_h.get(k))
            problems.append(f"{label}: workload differs in {', '.join(diff)} (base "
                            f"{ {k: wl_b.get(k) for k in diff} }, head { {k: wl_h.get(k) for k in diff} })")
        cb, ch = _pass_count(ev_b["correctness"], rb.run_id), _pass_count(ev_h["correctness"], rh.run_id)
        qb, qh = _pass_count(ev_b["protocol"], rb.run_id), _pass_count(ev_h["protocol"], rh.run_id)
        n_noise = 0 if root is None else sum(
            1 for r in store.list_runs(root) if (r.version, r.model, r.profile) == (rb.version, rb.model, rb.profile)
            and r.run_id not in (rb.run_id, rh.run_id))
        point_rows.append({
            "model": key[0], "profile": key[1], "point_id": key[2], "base_noise_runs": n_noise,
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
            "dataset_sha256_base": ds_b, "dataset_sha256_head": ds_h,
            "dataset_equal": bool(ds_b and ds_b == ds_h), "workload_equal": wl_b == wl_h,
        })
        xs_b, xs_h = point_samples(req_b, rb.run_id, key[2]), point_samples(req_h, rh.run_id, key[2])
        samples[key] = {"base": xs_b, "head": xs_h}
        emp = _empirical_noise(root, rb, key[2], exclude=(rh.run_id,))
        # Bonferroni over the tests of this point: family-wise confidence `opts.confidence` per point
        k = sum(min(len(xs_b[m]), len(xs_h[m])) >= max(2, min_n(q)) for m, *_ in METRICS for _, q in STATS)
        popts = replace(opts, confidence=1 - (1 - opts.confidence) / max(1, k))
        for m, lab, unit, lower in METRICS:
            for row in compare_samples(xs_b[m], xs_h[m], unit=unit, lower_is_better=lower, opts=popts,
                                       empirical_rel=emp.get(m)):
                row["ci_level"] = popts.confidence if row["tested"] else float("nan")
                metric_rows.append({"model": key[0], "profile": key[1], "point_id": key[2], "metric": m,
                                    "label": lab, "unit": unit, "lower_is_better": lower, **row,
                                    "base_run": rb.label, "head_run": rh.label})
        bt, ht = sb.get("output_token_throughput_tps"), sh.get("output_token_throughput_tps")
        if bt is not None and ht is not None and np.isfinite([bt, ht]).all():
            metric_rows.append({"model": key[0], "profile": key[1], "point_id": key[2],
                                "metric": "output_token_throughput_tps", "label": "output tokens/s (AIPerf aggregate)",
                                "unit": "tok/s", "lower_is_better": False, "stat": "aggregate",
                                "base": float(bt), "head": float(ht), "delta": float(ht - bt),
                                "rel_delta": float((ht - bt) / bt) if bt else float("nan"),
                                "n_base": sb.get("n_matched"), "n_head": sh.get("n_matched"), "mw_p": float("nan"),
                                "ci_low": float("nan"), "ci_high": float("nan"), "noise_floor": float("nan"),
                                "noise_floor_empirical_rel": 0.0, "tested": False, "significant": False,
                                "verdict": "not tested (one value per run)",
                                "base_run": rb.label, "head_run": rh.label})
    if problems and not opts.force:
        raise CompareRefused("refusing to compare: the runs are not comparable:\n  " + "\n  ".join(problems)
                             + "\n(pass --force to compare anyway; the page will say so at the top)")

    prov_rows = []
    for mp in sorted({(k[0], k[1]) for k in common}):
        rb = next(pb[k][0] for k in common if k[:2] == mp)
        rh = next(ph[k][0] for k in common if k[:2] == mp)
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
    return Comparison(base=base, head=head, metrics=pd.DataFrame(metric_rows), points=pd.DataFrame(point_rows),
                      provenance=pd.DataFrame(prov_rows, columns=["model", "profile", "field", "base", "head", "differs"]),
                      only_in=pd.DataFrame(only, columns=["model", "profile", "point_id", "only_in", "run_id"]),
                      problems=problems, samples=samples, options=opts)
