"""Where run-to-run noise was not measured: a delta far beyond any plausible noise (its whole CI
beyond the default floor, `CompareOptions.default_floor_rel`) gets a verdict naming the floor; a
delta inside it stays inconclusive; the floor is configurable and can be turned off."""

from __future__ import annotations

import numpy as np

from fixtures.compare_runs import lognormal
from qualflow.evidence.compare.config import CompareOptions
from qualflow.evidence.compare.stats import INCONCLUSIVE, compare_samples, direction


def _p50(base_median, head_median, opts, unit="ms", lower=True):
    rows = compare_samples(
        lognormal(60, base_median, 0.1, np.random.default_rng(1)),
        lognormal(60, head_median, 0.1, np.random.default_rng(2)),
        unit=unit,
        lower_is_better=lower,
        opts=opts,
    )
    return {r["stat"]: r for r in rows}["p50"]


def test_far_beyond_the_default_floor_is_judged_without_measured_noise():
    o = CompareOptions(resamples=300)
    assert o.default_floor_rel == 0.5 and not o.floor_configured
    itl = _p50(10.0, 225.0, o)  # +2,150 %: the endpoint's ITL
    assert itl["verdict"] == "regression beyond a default floor of 50 %" and itl["significant"]
    assert direction(itl["verdict"]) == "regression"
    tps = _p50(2550.0, 136.0, o, unit="tok/s", lower=False)  # -95 % throughput
    assert tps["verdict"] == "regression beyond a default floor of 50 %"
    fast = _p50(100.0, 20.0, o)  # 5x lower latency
    assert fast["verdict"] == "improvement beyond a default floor of 50 %"


def test_inside_the_default_floor_stays_inconclusive():
    o = CompareOptions(resamples=300)
    r = _p50(100.0, 130.0, o)  # +30 %: the CI excludes 0, not the floor
    assert r["ci_low"] > 0 and r["verdict"] == INCONCLUSIVE and not r["significant"]


def test_the_default_floor_is_configurable_and_can_be_off():
    far = _p50(
        10.0, 40.0, CompareOptions(resamples=300, default_floor_rel=4.0)
    )  # +300 % inside a 400 % floor
    assert far["verdict"] == INCONCLUSIVE
    r = _p50(10.0, 40.0, CompareOptions(resamples=300, default_floor_rel=1.0))
    assert r["verdict"] == "regression beyond a default floor of 100 %"
    off = _p50(10.0, 225.0, CompareOptions(resamples=300, default_floor_rel=0.0))
    assert off["verdict"] == INCONCLUSIVE
    # measured noise or a configured floor decides alone: no default-floor wording there
    conf = _p50(10.0, 225.0, CompareOptions(resamples=300, noise_rel=0.1))
    assert conf["verdict"] == "regression"
