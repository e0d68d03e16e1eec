"""Compare statistics on synthetic data (fast): bootstrap CI of a quantile difference, Mann-Whitney,
noise floor, the verdicts; and the refusal logic on small synthetic evidence."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fixtures.compare_runs import lognormal, write_run
from qualflow.evidence import store
from qualflow.evidence.compare.bootstrap import bootstrap_delta, mann_whitney_p
from qualflow.evidence.compare.comparison import CompareRefused, compare_evidence
from qualflow.evidence.compare.config import CompareOptions
from qualflow.evidence.compare.stats import (
    compare_samples,
    judge,
    min_n,
    noise_floor,
)
from qualflow.evidence.store import write_table
from qualflow.report.compare import run_compare


def test_bootstrap_ci_covers_true_shift_and_excludes_zero():
    b, h = lognormal(200, 100.0), lognormal(200, 130.0)
    d, lo, hi = bootstrap_delta(b, h, 50, resamples=1000, seed=0)
    assert lo < d < hi and lo > 0 and lo < 30 < hi * 1.5


def test_bootstrap_same_distribution_contains_zero_and_is_deterministic():
    b, h = lognormal(100, 100.0), lognormal(100, 100.0)
    r1 = bootstrap_delta(b, h, 90, resamples=1000, seed=3)
    r2 = bootstrap_delta(b, h, 90, resamples=1000, seed=3)
    assert r1 == r2 and r1[1] < 0 < r1[2]


def test_bootstrap_too_few_samples_is_nan():
    assert all(np.isnan(bootstrap_delta([1.0], [2.0, 3.0], 50)))


def test_mann_whitney():
    assert mann_whitney_p(lognormal(50, 100), lognormal(50, 200)) < 1e-6
    assert mann_whitney_p([5.0] * 10, [5.0] * 10) == 1.0


def test_noise_floor_and_judge():
    o = CompareOptions(noise_rel=0.10, noise_abs_ms=2.0)
    assert noise_floor(100.0, "ms", o) == pytest.approx(10.0)
    assert noise_floor(5.0, "ms", o) == 2.0  # absolute floor for small ms values
    assert noise_floor(5.0, "tok/s", o) == pytest.approx(0.5)
    assert noise_floor(100.0, "ms", o, empirical_rel=0.3) == pytest.approx(30.0)
    assert judge(20.0, 5.0, 35.0, floor=10.0)
    assert not judge(8.0, 5.0, 11.0, floor=10.0)  # CI excludes 0 but within the floor
    assert not judge(20.0, -1.0, 40.0, floor=10.0)  # beyond the floor but CI has 0
    assert not judge(float("nan"), 1, 2, floor=0)


FLOOR = {
    "noise_rel": 0.10,
    "noise_abs_ms": 2.0,
}  # a configured floor (what the defaults used to be)


def test_compare_samples_verdicts():
    o = CompareOptions(resamples=500, **FLOOR)
    slow = compare_samples(
        lognormal(120, 100, 0.1), lognormal(120, 150, 0.1), unit="ms", lower_is_better=True, opts=o
    )
    by = {r["stat"]: r for r in slow}
    assert by["p50"]["verdict"] == "regression" and by["p90"]["significant"]
    assert by["p99"]["verdict"] == "not tested"  # < 800 requests per side
    fast = compare_samples(
        lognormal(60, 10, 0.1), lognormal(60, 15, 0.1), unit="tok/s", lower_is_better=False, opts=o
    )
    assert fast[0]["verdict"] == "improvement"
    same = compare_samples(
        lognormal(60, 100, 0.1), lognormal(60, 101, 0.1), unit="ms", lower_is_better=True, opts=o
    )
    assert not any(r["significant"] for r in same)
    few = {
        r["stat"]: r
        for r in compare_samples(
            lognormal(30, 100, 0.1),
            lognormal(30, 150, 0.1),
            unit="ms",
            lower_is_better=True,
            opts=o,
        )
    }
    assert (
        few["p50"]["significant"] and not few["p90"]["tested"]
    )  # p90 needs >= 80 requests per side
    big = compare_samples(
        lognormal(1000, 100, 0.1),
        lognormal(1000, 150, 0.1),
        unit="ms",
        lower_is_better=True,
        opts=o,
    )
    assert {r["stat"]: r for r in big}["p99"]["tested"]
    assert [min_n(q) for q in (50, 90, 99)] == [16, 80, 800]


def test_false_positive_rate_on_identical_distributions_is_low():
    o = CompareOptions(resamples=300, **FLOOR)
    rng = np.random.default_rng(7)
    hits = sum(
        any(
            r["significant"]
            for r in compare_samples(
                lognormal(40, 100, 0.3, rng),
                lognormal(40, 100, 0.3, rng),
                unit="ms",
                lower_is_better=True,
                opts=o,
            )
        )
        for _ in range(40)
    )
    assert (
        hits <= 4
    )  # 5 % nominal: 2 expected of 40; BCa (not the percentile interval) gives 3 on this seed


def test_store_keeps_every_run_and_resolves_specs(tmp_path):
    write_run(tmp_path, "v1", "m.fp16.A", started="2026-01-01T00:00:00")
    write_run(
        tmp_path, "v1", "m.fp16.B", started="2026-01-02T00:00:00"
    )  # re-qualification, same version
    write_run(
        tmp_path, "v2", "m.fp16.A", started="2026-01-03T00:00:00"
    )  # same run id, other version
    refs = store.list_runs(tmp_path)
    assert [(r.version, r.run_id) for r in refs] == [
        ("v1", "m.fp16.A"),
        ("v1", "m.fp16.B"),
        ("v2", "m.fp16.A"),
    ]
    assert [r.run_id for r in store.resolve("v1", tmp_path)] == ["m.fp16.B"]
    assert store.resolve("v1@m.fp16.A", tmp_path)[0].path.name == "m.fp16.A"
    assert store.resolve("m.fp16.B", tmp_path)[0].version == "v1"
    with pytest.raises(store.StoreError, match="several versions"):
        store.resolve("m.fp16.A", tmp_path)
    with pytest.raises(store.StoreError, match="names no version"):
        store.resolve("nope", tmp_path)
    ls = store.listing(tmp_path)
    assert len(ls) == 3 and ls["latest"].sum() == 2 and set(ls["status"]) == {"aiperf-qualified"}


def test_legacy_evidence_without_history_is_listed(tmp_path):
    write_run(tmp_path, "old", "m.fp16.X", history=False)
    assert [r.run_id for r in store.list_runs(tmp_path)] == ["m.fp16.X"]


def test_refuses_different_dataset_or_workload_unless_forced(tmp_path):
    write_run(tmp_path, "v1", "m.fp16.A")
    write_run(tmp_path, "v2", "m.fp16.B", dataset="e" * 64)
    write_run(tmp_path, "v3", "m.fp16.C", osl=32)
    with pytest.raises(CompareRefused, match="dataset identity differs"):
        run_compare("v1", "v2", root=tmp_path, out=tmp_path / "o1")
    with pytest.raises(CompareRefused, match="workload differs in osl"):
        run_compare("v1", "v3", root=tmp_path, out=tmp_path / "o2")
    res = run_compare(
        "v1",
        "v3",
        root=tmp_path,
        out=tmp_path / "o3",
        opts=CompareOptions(force=True, resamples=200),
    )
    assert res["forced"] and "osl" in res["problems"][0]
    assert pd.read_parquet(tmp_path / "o3" / "compare.parquet")["forced"].all()


def test_no_common_point_is_refused(tmp_path):
    write_run(tmp_path, "v1", "m.fp16.A")
    d = tmp_path / "v9" / "m" / "fp16"
    write_run(tmp_path, "v9", "m.fp16.Z")
    r = pd.read_parquet(d / "runs.parquet")
    r["point_id"] = "other"
    write_table(r, d / "runs.parquet")
    with pytest.raises(CompareRefused, match="no model/profile/workload point in common"):
        compare_evidence(
            store.resolve("v1", tmp_path), store.resolve(str(d), tmp_path), base="v1", head="v9"
        )


def test_compare_table_provenance_and_empirical_noise(tmp_path):
    write_run(tmp_path, "v1", "m.fp16.A", started="2026-01-01", seed=1)
    write_run(
        tmp_path, "v1", "m.fp16.B", started="2026-01-02", seed=2, median=103.0
    )  # base's own run-to-run noise
    write_run(
        tmp_path,
        "v2",
        "m.fp16.C",
        started="2026-01-03",
        seed=3,
        median=160.0,
        packages={"torch": "2.14.0"},
    )
    write_run(
        tmp_path,
        "v2",
        "m.fp16.D",
        started="2026-01-04",
        seed=4,
        median=158.0,
        packages={"torch": "2.14.0"},
    )
    res = run_compare(
        "v1", "v2", root=tmp_path, out=tmp_path / "o", opts=CompareOptions(resamples=300)
    )
    m = pd.read_parquet(tmp_path / "o" / "compare.parquet")
    lat = m[(m["metric"] == "client_request_latency_ms") & (m["stat"] == "p50")].iloc[0]
    assert (
        lat["significant"] and lat["verdict"] == "regression" and lat["base_run"] == "v1@m.fp16.B"
    )
    assert lat["head_run"] == "v2@m.fp16.D" and lat["noise_measured"]
    assert lat["noise_floor_empirical_rel"] > 0  # measured from v1's two runs
    prov = pd.read_parquet(tmp_path / "o" / "provenance.parquet")
    diff = set(prov[prov["differs"]]["field"])
    assert "packages.torch" in diff and "software_key" in diff and "bundle_hash" not in diff
    assert any("request latency p50" in s for s in res["significant"])
    html = (tmp_path / "o" / "compare.html").read_text()
    assert "data:image/png;base64," in html and "bootstrap" in html and "Mann-Whitney" in html
    assert "noise-note" not in html  # v1 has a second run: the floor is measured
    assert pd.read_parquet(tmp_path / "o" / "points.parquet")["base_noise_runs"].tolist() == [1]


def test_page_says_when_nothing_could_be_tested(tmp_path):
    write_run(tmp_path, "v1", "m.fp16.A", n=8, seed=1)
    write_run(tmp_path, "v2", "m.fp16.B", n=8, seed=2, median=150.0)
    res = run_compare(
        "v1", "v2", root=tmp_path, out=tmp_path / "o", opts=CompareOptions(resamples=100)
    )
    assert res["significant"] == []
    html = (tmp_path / "o" / "compare.html").read_text()
    assert "Nothing could be tested" in html and "No significant change" not in html
