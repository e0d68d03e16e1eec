"""Compare's run-to-run noise and comparability on synthetic evidence (fast): the floor comes only
from comparable runs, server settings are checked and diffed, a delta without measured noise is
inconclusive, three identical-software runs compared pairwise flag nothing, the CI is calibrated
(an injected p90 shift detected, no shift not flagged, over seeds), the family spans points."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from fixtures.compare_runs import SETTINGS, write_run
from qualflow.evidence import store
from qualflow.evidence.compare.comparison import CompareRefused, compare_evidence
from qualflow.evidence.compare.config import CompareOptions
from qualflow.evidence.compare.stats import INCONCLUSIVE, compare_samples, resamples_for
from qualflow.report.compare import run_compare

FAST = CompareOptions(resamples=200)


def _row(res_dir, metric="client_request_latency_ms", stat="p50"):
    m = pd.read_parquet(res_dir / "compare.parquet")
    return m[(m["metric"] == metric) & (m["stat"] == stat)].iloc[0]


def test_noise_floor_only_from_comparable_runs(tmp_path):
    # base version v1: the compared run B, one comparable run A (3 % apart) and four runs that are
    # not comparable (other dataset, workload, server settings, status), each wildly different
    write_run(tmp_path, "v1", "m.fp16.A", started="2026-01-01", seed=1, median=103.0)
    write_run(
        tmp_path, "v1", "m.fp16.X1", started="2026-01-02", seed=2, median=300.0, dataset="e" * 64
    )
    write_run(tmp_path, "v1", "m.fp16.X2", started="2026-01-03", seed=3, median=300.0, osl=32)
    write_run(
        tmp_path,
        "v1",
        "m.fp16.X3",
        started="2026-01-04",
        seed=4,
        median=300.0,
        settings={**SETTINGS, "max_batch": 64},
    )
    write_run(
        tmp_path,
        "v1",
        "m.fp16.X4",
        started="2026-01-05",
        seed=5,
        median=300.0,
        status="implemented",
    )
    write_run(
        tmp_path, "v1", "m.fp16.X5", started="2026-01-05", seed=5, median=300.0, settings=None
    )  # unknown
    write_run(tmp_path, "v1", "m.fp16.B", started="2026-01-06", seed=6)
    write_run(tmp_path, "v2", "m.fp16.C", started="2026-01-07", seed=7, median=160.0)
    write_run(tmp_path, "v2", "m.fp16.D", started="2026-01-08", seed=8, median=162.0)
    run_compare("v1", "v2", root=tmp_path, out=tmp_path / "o", opts=FAST)
    lat = _row(tmp_path / "o")
    assert lat["noise_measured"] and 0 < lat["noise_floor_empirical_rel"] < 0.15, lat.to_dict()
    assert lat["verdict"] == "regression"
    pts = pd.read_parquet(tmp_path / "o" / "points.parquet").iloc[0]
    assert (pts["base_noise_runs"], pts["head_noise_runs"]) == (1, 1)
    assert pts["base_comparable_runs"] == "m.fp16.B, m.fp16.A"


def test_server_settings_refused_diffed_and_unknown_said(tmp_path):
    write_run(tmp_path, "v1", "m.fp16.A", seed=1)
    write_run(tmp_path, "v2", "m.fp16.B", seed=2, settings={**SETTINGS, "max_batch": 64})
    write_run(tmp_path, "old", "m.fp16.O", seed=3, settings=None)
    with pytest.raises(
        CompareRefused, match=r"server settings differ in max_batch \(base \{'max_batch': 8\}"
    ):
        run_compare("v1", "v2", root=tmp_path, out=tmp_path / "o1", opts=FAST)
    res = run_compare(
        "v1",
        "v2",
        root=tmp_path,
        out=tmp_path / "o2",
        opts=CompareOptions(resamples=200, force=True),
    )
    assert res["forced"] and "max_batch" in res["problems"][0]
    prov = pd.read_parquet(tmp_path / "o2" / "provenance.parquet").set_index("field")
    assert (
        prov.loc["server_settings.max_batch", "differs"]
        and prov.loc["server_settings.max_batch", "head"] == "64"
    )
    assert not prov.loc["server_settings.cpu_threads", "differs"]
    # older evidence without server settings: compared, but the page and the result say they are
    # unknown
    res = run_compare("old", "v1", root=tmp_path, out=tmp_path / "o3", opts=FAST)
    assert not res["forced"] and "server settings unknown for base" in res["notes"][0]
    html = (tmp_path / "o3" / "compare.html").read_text()
    assert "server settings unknown for base" in html
    prov = pd.read_parquet(tmp_path / "o3" / "provenance.parquet").set_index("field")
    assert prov.loc["server_settings", "base"] == "unknown (not recorded)"
    assert pd.read_parquet(tmp_path / "o3" / "points.parquet")["server_settings_equal"].isna().all()


def test_unmeasured_noise_is_inconclusive_unless_a_floor_is_configured(tmp_path):
    write_run(tmp_path, "v1", "m.fp16.A", seed=1)
    write_run(tmp_path, "v2", "m.fp16.B", seed=2, median=150.0)
    res = run_compare("v1", "v2", root=tmp_path, out=tmp_path / "o", opts=FAST)
    lat = _row(tmp_path / "o")
    assert not lat["significant"] and lat["verdict"] == INCONCLUSIVE and lat["ci_low"] > 0
    assert lat["delta"] == pytest.approx(lat["head"] - lat["base"]) and lat["rel_delta"] > 0.3
    assert res["significant"] == [] and any("request latency p50" in s for s in res["inconclusive"])
    html = (tmp_path / "o" / "compare.html").read_text()
    assert (
        "Inconclusive: run-to-run noise not measured" in html
        and "No significant change" not in html
    )
    assert "noise-note" in html
    # a configured floor makes the same delta judgeable
    run_compare(
        "v1",
        "v2",
        root=tmp_path,
        out=tmp_path / "f",
        opts=CompareOptions(resamples=200, noise_rel=0.1),
    )
    assert _row(tmp_path / "f")["verdict"] == "regression"


def test_three_identical_software_runs_pairwise_flag_nothing(tmp_path):
    # same commit qualified three times; the host's load moves whole runs (+37 %, -10 %), as seen
    for rid, med, seed in (
        ("m.fp16.R1", 100.0, 1),
        ("m.fp16.R2", 137.0, 2),
        ("m.fp16.R3", 90.0, 3),
    ):
        write_run(tmp_path, "v1", rid, median=med, seed=seed, n=120, started=f"2026-01-0{seed}")
    for a, b in itertools.combinations(("m.fp16.R1", "m.fp16.R2", "m.fp16.R3"), 2):
        res = run_compare(f"v1@{a}", f"v1@{b}", root=tmp_path, out=tmp_path / f"{a}-{b}", opts=FAST)
        assert res["significant"] == [], (a, b, res["significant"])
        m = pd.read_parquet(tmp_path / f"{a}-{b}" / "compare.parquet")
        assert m[m["tested"]]["noise_measured"].all()  # the version's three runs measure the noise


def test_per_request_throughput_uses_server_token_counts(tmp_path):
    write_run(tmp_path, "v1", "m.fp16.A", seed=1, out_tokens=32)  # client_osl stays 16
    write_run(tmp_path, "v2", "m.fp16.B", seed=1, out_tokens=32)
    run_compare("v1", "v2", root=tmp_path, out=tmp_path / "o", opts=FAST)
    tps = _row(tmp_path / "o", metric="output_tps_per_request")
    lat = _row(tmp_path / "o")
    assert tps["base"] == pytest.approx(32 / (lat["base"] / 1000), rel=0.05)


def test_family_spans_points_and_resamples_scale_with_it(tmp_path):
    for rid, seed in (("m.fp16.A", 1), ("m.fp16.B", 2)):
        for point in ("w_c1", "w_c2"):
            d = write_run(
                tmp_path / point,
                "v1" if rid.endswith("A") else "v2",
                rid,
                seed=seed,
                point=point,
                n=100,
            )
    refs = {}
    for v in ("v1", "v2"):
        tabs = {
            t: pd.concat(
                [
                    pd.read_parquet(tmp_path / p / v / "m" / "fp16" / f"{t}.parquet")
                    for p in ("w_c1", "w_c2")
                ]
            )
            for t in ("requests", "summary", "runs", "correctness", "protocol")
        }
        d = tmp_path / "ev" / v / "m" / "fp16"
        d.mkdir(parents=True)
        for t, df in tabs.items():
            df.to_parquet(d / f"{t}.parquet")
        refs[v] = store.resolve(v, tmp_path / "ev")
    cmp = compare_evidence(
        refs["v1"], refs["v2"], base="v1", head="v2", opts=FAST, root=tmp_path / "ev"
    )
    t = cmp.metrics[cmp.metrics["tested"]]
    assert (
        set(t["point_id"]) == {"w_c1", "w_c2"} and len(t) == 20
    )  # 5 metrics x p50, p90 x 2 points
    assert (t["tests_in_family"] == 20).all()
    assert (t["resamples"] == resamples_for(0.05 / 20, 200)).all() and t["resamples"].iloc[
        0
    ] >= 40_000
    if not t["significant"].any() and not (t["q_value"] <= 0.05).any():
        assert t["ci_level"].iloc[0] == pytest.approx(
            1 - 0.05 / 20
        )  # Bonferroni level when none selected


def test_ci_calibration_with_an_injected_p90_shift():
    """Over repeated seeds: a tail shift (p90 +~30 %, p50 unchanged) is detected, no shift is not
    flagged. A configured floor of 0 leaves the decision to the CI alone."""
    o = CompareOptions(resamples=200, noise_rel=0.0, noise_abs_ms=0.0)
    rng = np.random.default_rng(11)
    ln = lambda k: 100 * np.exp(0.3 * rng.standard_normal(k))  # noqa: E731
    seeds, n = 12, 160
    fp = det = 0
    for _ in range(seeds):
        fp += any(
            r["significant"]
            for r in compare_samples(ln(n), ln(n), unit="ms", lower_is_better=True, opts=o)
        )
        b, h = ln(n), ln(n)
        h = np.where(h > np.percentile(h, 75), h * 1.35, h)
        by = {r["stat"]: r for r in compare_samples(b, h, unit="ms", lower_is_better=True, opts=o)}
        det += by["p90"]["verdict"] == "regression"
    assert det >= seeds - 1 and fp <= 2, (det, fp)


def test_a_point_recorded_with_its_set_keys_only_fingerprints_as_the_full_point():
    """Older evidence recorded a point with the keys the workflow set; newer evidence records every
    AiperfPoint field (points.json). The same point must fingerprint the same, or a compare across
    that change refuses as if the workload differed."""
    from qualflow.aiperf.command import AiperfPoint
    from qualflow.evidence.compare.noise import fingerprint

    short = {
        "point_id": "tiny_c2",
        "concurrency": 2,
        "isl": 32,
        "osl": 16,
        "workload": "tiny",
        "goodput": {"ttft_ms": 10000},
        "repeats": 1,
    }
    full = AiperfPoint.from_dict(short).to_dict()
    assert set(full) > set(short)
    row = {"dataset_sha256": "d", "server_settings": '{"device": "cpu"}', "status": "slo-met"}
    fb = fingerprint({**row, "workload": json.dumps(short)})
    fh = fingerprint({**row, "workload": json.dumps(full)})
    assert fb == fh and fb.comparable_to(fh)
    other = fingerprint({**row, "workload": json.dumps({**full, "osl": 32})})
    assert other != fb


def test_a_point_with_a_harness_ceiling_stays_comparable_to_the_same_point_without():
    """harness_ceiling adds a run against the synthetic engine and changes none of the stack's
    requests: it is no part of the fingerprint, as repeats is not."""
    from qualflow.evidence.compare.noise import fingerprint

    point = {"point_id": "tiny_c2", "concurrency": 2, "isl": 32, "osl": 16, "workload": "tiny"}
    row = {"dataset_sha256": "d", "server_settings": '{"device": "cpu"}', "status": "slo-met"}
    plain = fingerprint({**row, "workload": json.dumps(point)})
    with_ceiling = fingerprint({**row, "workload": json.dumps({**point, "harness_ceiling": True})})
    assert plain == with_ceiling and plain.comparable_to(with_ceiling)
