"""The comparison math of the alternated A/B benchmarks (bench/paired.py): per-round ratios, the
slowdown in %, the latency a side adds pair by pair, and the target check."""

from __future__ import annotations

import pytest

from qualflow.bench import paired


def test_the_ratio_is_the_median_of_the_rounds_not_the_ratio_of_the_medians():
    # a slow second round slows both sides: its ratio (0.9) still counts as the others
    p = paired.paired([100.0, 50.0, 100.0], [90.0, 45.0, 95.0])
    assert p["ratio"] == pytest.approx(0.9)
    assert (p["ratio_min"], p["ratio_max"]) == (pytest.approx(0.9), pytest.approx(0.95))
    assert (p["base"], p["test"], p["rounds"]) == (100.0, 90.0, 3)


def test_rounds_that_do_not_pair_are_an_error():
    with pytest.raises(ValueError, match="paired rounds"):
        paired.paired([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="paired rounds"):
        paired.paired([], [])


def test_a_slower_itl_is_a_positive_percentage():
    s = paired.slowdown_pct([2.0, 2.0, 2.0], [2.04, 2.1, 2.0])
    assert s["slower_pct"] == pytest.approx(2.0)
    assert s["slower_pct_min"] == pytest.approx(0.0)
    assert s["slower_pct_max"] == pytest.approx(5.0)


def test_added_latency_is_taken_pair_by_pair():
    base = [10.0, 20.0, 30.0, 40.0, 50.0]
    test = [12.0, 21.0, 33.0, 41.0, 90.0]  # one outlier pair
    a = paired.added_ms(base, test)
    assert a["added_ms_p50"] == pytest.approx(2.0)
    assert a["added_ms_p90"] == pytest.approx(40.0)
    assert a["samples"] == 5


def test_a_figure_is_judged_against_its_target():
    assert paired.judged({"ratio": 0.91}, "ratio", at_least=0.9)["met"] is True
    low = paired.judged({"ratio": 0.89}, "ratio", at_least=0.9)
    assert low["met"] is False and low["target"] == {"ratio": {"at_least": 0.9}}
    assert paired.judged({"pct": 3.5}, "pct", at_most=3.0)["met"] is False
