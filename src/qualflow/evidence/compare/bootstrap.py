"""The bootstrap of one test: head - base of a percentile, its BCa interval at any level and the
p-value got by inverting that interval (`DeltaTest`); a Mann-Whitney p-value beside it."""

from __future__ import annotations

import math
import warnings

import numpy as np


def clean(x) -> np.ndarray:
    """The values of `x` as floats, NaNs dropped."""
    x = np.asarray(x, dtype=float)
    return x[~np.isnan(x)]


def _percentile_diff(q: float):
    def stat(b, h, axis=-1):
        return np.percentile(h, q, axis=axis) - np.percentile(b, q, axis=axis)

    return stat


class DeltaTest:
    """The bootstrap of head - base of percentile q: `p` (BCa-inverted) and `ci(alpha)`."""

    def __init__(self, base, head, q: float, *, resamples: int, seed: int = 0):
        from scipy.stats import bootstrap

        self.b, self.h, self.q = clean(base), clean(head), q
        self.stat = _percentile_diff(q)
        self.delta = float(self.stat(self.b, self.h))
        self.resamples = resamples
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.res = bootstrap(
                (self.b, self.h),
                self.stat,
                method="percentile",
                n_resamples=resamples,
                vectorized=True,
                batch=max(1, 4_000_000 // max(len(self.b), len(self.h))),
                rng=np.random.default_rng(seed),
            )
        dist = self.res.bootstrap_distribution
        self.degenerate = bool(np.ptp(dist) == 0)
        self.p = self._p_value()

    def ci(self, alpha: float) -> tuple[float, float]:
        """Two-sided BCa interval at level 1 - alpha (percentile interval where BCa is
        undefined)."""
        if self.degenerate:
            return self.delta, self.delta
        from scipy.stats import bootstrap

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for method in ("BCa", "percentile"):
                ci = bootstrap(
                    (self.b, self.h),
                    self.stat,
                    method=method,
                    n_resamples=0,
                    bootstrap_result=self.res,
                    confidence_level=1 - alpha,
                    vectorized=True,
                ).confidence_interval
                if np.isfinite([ci.low, ci.high]).all():
                    return float(ci.low), float(ci.high)
        return float("nan"), float("nan")

    def _p_value(self) -> float:
        """The smallest alpha whose interval excludes 0 (bisection in log alpha; floor 1 /
        resamples)."""
        if self.degenerate:
            return 1.0 if self.delta == 0 else 1.0 / self.resamples

        def holds0(alpha):
            lo, hi = self.ci(alpha)
            return not np.isfinite(lo) or lo <= 0 <= hi

        lo_a = 1.0 / self.resamples
        if holds0(1.0 - 1e-9):
            return 1.0
        if not holds0(lo_a):
            return lo_a
        a, b = math.log(lo_a), 0.0  # the interval holds 0 at alpha = exp(a), excludes it at exp(b)
        for _ in range(14):  # log-alpha resolution < 1e-3
            mid = (a + b) / 2
            if holds0(math.exp(mid)):
                a = mid
            else:
                b = mid
        return float(math.exp(b))


def bootstrap_delta(
    base, head, q: float, *, resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """(delta, ci_low, ci_high) of percentile q: head - base, BCa bootstrap at `confidence`."""
    b, h = clean(base), clean(head)
    if len(b) < 2 or len(h) < 2:
        return (float("nan"),) * 3
    t = DeltaTest(b, h, q, resamples=resamples, seed=seed)
    return (t.delta, *t.ci(1 - confidence))


def mann_whitney_p(base, head) -> float:
    from scipy.stats import mannwhitneyu

    b, h = clean(base), clean(head)
    if len(b) < 2 or len(h) < 2:
        return float("nan")
    if np.all(b == b[0]) and np.all(h == h[0]) and b[0] == h[0]:
        return 1.0
    return float(mannwhitneyu(h, b, alternative="two-sided").pvalue)
