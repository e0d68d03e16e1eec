"""The statistics of a comparison (pure functions over arrays; unit-tested on synthetic data).

* Per test (one point, metric and percentile): delta = head - base of the percentile, a **BCa
  bootstrap** (bootstrap.py: `scipy.stats.bootstrap`, both runs' per-request rows resampled
  independently) and a p-value obtained by inverting the BCa interval (the largest level at which
  it still holds 0).
* Multiplicity: the family is every test of the comparison, across points and within one. The
  Benjamini-Hochberg procedure (`scipy.stats.false_discovery_control`) selects R of the m tests at
  false discovery rate alpha; every CI is shown at level 1 - alpha * max(R, 1) / m (the FCR-adjusted
  level of Benjamini & Yekutieli 2005), so "the CI excludes 0" is exactly "selected by BH". With
  nothing selected it is the Bonferroni level 1 - alpha / m.
* The resample count is scaled to the most stringent level (alpha / m): at least TAIL_RESAMPLES
  bootstrap values lie beyond each CI endpoint, so the interval never rests on a handful of
  resamples.
* Run-to-run noise is not visible to a within-run bootstrap. A delta is *significant* only when the
  CI excludes 0 **and** |delta| exceeds the noise floor **and** the floor means something:
  run-to-run noise measured on both sides (>= 2 comparable runs each: repeats or history) or a floor
  configured (--noise-rel / --noise-abs-ms). Otherwise a CI that excludes 0 is reported as
  "inconclusive: run-to-run noise not measured", with its delta, unless its whole CI lies beyond the
  default floor (`default_floor_rel` of the base value, far above any plausible run-to-run spread):
  then it is "regression (improvement) beyond a default floor of N %".
* Words: between two versions a change is a *regression* or an *improvement*; between two stacks
  (a cross-stack comparison) it is a *difference*, the head worse or better (`STACK_WORDS`).
"""

from __future__ import annotations

import math

import numpy as np

from qualflow.evidence.compare.bootstrap import DeltaTest, clean, mann_whitney_p
from qualflow.evidence.compare.config import CompareOptions

# (requests column, label, unit, lower is better)
METRICS = (
    ("client_ttft_ms", "TTFT", "ms", True),
    ("client_itl_ms", "ITL", "ms", True),
    ("client_request_latency_ms", "request latency", "ms", True),
    ("client_minus_task_wall_ms", "client - task-call gap", "ms", True),
    ("output_tps_per_request", "output tokens/s per request", "tok/s", False),
)
STATS = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0))
TAIL_MIN = 8  # a percentile is tested only with >= 8 requests beyond it per side: n >= 8 / (1 - q)
TAIL_RESAMPLES = 50  # bootstrap values beyond each CI endpoint at the most stringent level
MAX_RESAMPLES = 200_000
INCONCLUSIVE = "inconclusive: run-to-run noise not measured"
REGRESSION, IMPROVEMENT = "regression", "improvement"
# (head worse, head better): a cross-version comparison's words, and a cross-stack one's
VERSION_WORDS = (REGRESSION, IMPROVEMENT)
STACK_WORDS = ("difference (head worse)", "difference (head better)")


def words_for(cross_stack: bool) -> tuple[str, str]:
    """The verdict words of a comparison: a difference between stacks is no regression."""
    return STACK_WORDS if cross_stack else VERSION_WORDS


def beyond_default_floor(
    worse: bool, opts: CompareOptions, words: tuple[str, str] = VERSION_WORDS
) -> str:
    """The verdict of a delta beyond the default floor, naming the floor."""
    return f"{words[0] if worse else words[1]} beyond a default floor of {opts.default_floor_pct}"


def direction(verdict: str) -> str | None:
    """`regression` (head worse) or `improvement` (head better) for a verdict that says a change
    (with any floor), in either comparison's words (`words_for`), else None."""
    v = str(verdict)
    return next(
        (
            d
            for d, s in zip(VERSION_WORDS, STACK_WORDS)
            for x in (d, s)
            if v == x or v.startswith(x + " beyond")
        ),
        None,
    )


def default_floor_applies(rel_delta: float, opts: CompareOptions) -> bool:
    """|rel_delta| beyond the default floor (when it is on)."""
    return bool(
        opts.default_floor_rel > 0
        and np.isfinite(rel_delta)
        and abs(rel_delta) > opts.default_floor_rel
    )


def min_n(q: float) -> int:
    """Requests per side needed to test percentile q (p50: 16, p90: 80, p99: 800): a bootstrap of
    a quantile with fewer samples beyond it resamples the same few extreme values and its CI is
    too narrow."""
    return int(np.ceil(TAIL_MIN / (1 - q / 100) - 1e-9))


def resamples_for(alpha: float, minimum: int = 2000) -> int:
    """Bootstrap resamples for a two-sided interval at level 1 - alpha: >= TAIL_RESAMPLES beyond
    each end."""
    return int(min(MAX_RESAMPLES, max(minimum, math.ceil(TAIL_RESAMPLES / (alpha / 2)))))


def noise_floor(
    base_value: float, unit: str, opts: CompareOptions, empirical_rel: float = 0.0
) -> float:
    rel = max(opts.noise_rel or 0.0, empirical_rel or 0.0)
    floor = rel * abs(base_value) if np.isfinite(base_value) else 0.0
    if unit == "ms":
        floor = max(floor, opts.noise_abs_ms or 0.0)
    return float(floor)


def judge(delta: float, lo: float, hi: float, floor: float) -> bool:
    if not all(np.isfinite([delta, lo, hi])):
        return False
    return bool((lo > 0 or hi < 0) and abs(delta) > floor)


def is_tested(n_base: int, n_head: int, q: float) -> bool:
    return min(n_base, n_head) >= max(2, min_n(q))


def metric_rows(
    base,
    head,
    *,
    unit: str,
    lower_is_better: bool,
    opts: CompareOptions,
    resamples: int,
    empirical_rel: dict[str, float] | None = None,
    noise_measured: bool = False,
) -> list[dict]:
    """One row per statistic of one metric, with the bootstrap attached (`_test`); judged by
    `judge_family`."""
    b, h = clean(base), clean(head)
    p = mann_whitney_p(b, h)
    rows = []
    for stat, q in STATS:
        bv = float(np.percentile(b, q)) if len(b) else float("nan")
        hv = float(np.percentile(h, q)) if len(h) else float("nan")
        tested = is_tested(len(b), len(h), q)
        rows.append(
            {
                "stat": stat,
                "base": bv,
                "head": hv,
                "delta": hv - bv,
                "rel_delta": (hv - bv) / abs(bv) if bv else float("nan"),
                "n_base": len(b),
                "n_head": len(h),
                "mw_p": p,
                "unit": unit,
                "lower_is_better": lower_is_better,
                "noise_floor_empirical_rel": float((empirical_rel or {}).get(stat, 0.0)),
                "noise_measured": bool(noise_measured),
                "tested": tested,
                "_test": DeltaTest(b, h, q, resamples=resamples, seed=opts.seed)
                if tested
                else None,
            }
        )
    return rows


def judge_family(
    rows: list[dict], opts: CompareOptions, words: tuple[str, str] = VERSION_WORDS
) -> list[dict]:
    """Multiplicity over every tested row (Benjamini-Hochberg, FCR-adjusted CIs), then the verdicts
    in `words` (`words_for`)."""
    from scipy.stats import false_discovery_control

    alpha = 1 - opts.confidence
    tested = [r for r in rows if r["tested"]]
    m, n_sel = len(tested), 0
    if m:
        qv = false_discovery_control([r["_test"].p for r in tested], method="bh")
        n_sel = int(np.sum(qv <= alpha))
        for r, x in zip(tested, qv):
            r["q_value"] = float(x)
    level_alpha = alpha * max(n_sel, 1) / m if m else float("nan")
    for r in rows:
        t = r.pop("_test", None)
        floor = noise_floor(r["base"], r["unit"], opts, r["noise_floor_empirical_rel"])
        r.update(
            {"noise_floor": floor, "floor_configured": opts.floor_configured, "tests_in_family": m}
        )
        if t is None:
            r.update(
                {
                    "p_value": float("nan"),
                    "q_value": float("nan"),
                    "ci_low": float("nan"),
                    "ci_high": float("nan"),
                    "ci_level": float("nan"),
                    "resamples": 0,
                    "significant": False,
                    "verdict": "not tested",
                }
            )
            continue
        lo, hi = t.ci(level_alpha)
        sig, verdict = _verdict(r, (lo, hi), floor, opts, words)
        r.update(
            {
                "p_value": t.p,
                "ci_low": lo,
                "ci_high": hi,
                "ci_level": 1 - level_alpha,
                "resamples": t.resamples,
                "significant": sig,
                "verdict": verdict,
            }
        )
    return rows


def _verdict(
    r: dict, ci: tuple[float, float], floor: float, opts: CompareOptions, words: tuple[str, str]
) -> tuple[bool, str]:
    """(significant, verdict) of one tested row: beyond its noise floor; without a meaningful floor,
    beyond the default floor, else inconclusive when its CI excludes 0; else within noise."""
    lo, hi = ci
    excl0 = bool(np.isfinite([lo, hi]).all() and (lo > 0 or hi < 0))
    worse = (r["delta"] > 0) == r["lower_is_better"]
    if r["noise_measured"] or opts.floor_configured:
        sig = judge(r["delta"], lo, hi, floor)
        return sig, ((words[0] if worse else words[1]) if sig else "within noise")
    # the whole CI beyond the default floor: a point estimate just past it could be noise plus
    # chance
    near = min(abs(lo), abs(hi)) if excl0 else float("nan")
    if excl0 and r["base"] and default_floor_applies(near / abs(r["base"]), opts):
        return True, beyond_default_floor(worse, opts, words)
    return False, INCONCLUSIVE if excl0 else "within noise"


def compare_samples(
    base,
    head,
    *,
    unit: str,
    lower_is_better: bool,
    opts: CompareOptions,
    empirical_rel: dict[str, float] | None = None,
    noise_measured: bool = False,
) -> list[dict]:
    """One metric of one point, judged as its own family (compare_evidence judges all points
    together)."""
    k = sum(is_tested(len(clean(base)), len(clean(head)), q) for _, q in STATS)
    B = resamples_for((1 - opts.confidence) / max(k, 1), opts.resamples)
    rows = metric_rows(
        base,
        head,
        unit=unit,
        lower_is_better=lower_is_better,
        opts=opts,
        resamples=B,
        empirical_rel=empirical_rel,
        noise_measured=noise_measured,
    )
    return judge_family(rows, opts)
