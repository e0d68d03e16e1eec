"""The Snakemake rule `compare`, driven by config (validated), on synthetic evidence in a temp copy
of the workflow: it writes the table, the page and the plots; unset or bad config stops it with a
message naming the key."""

from __future__ import annotations

import pandas as pd

from fixtures.compare_runs import write_run
from fixtures.snakemake import copy_workflow, smk


def test_compare_rule(tmp_path):
    copy_workflow(tmp_path)
    write_run(tmp_path / "results" / "evidence", "v1", "m.fp16.A", seed=1)
    write_run(tmp_path / "results" / "evidence", "v2", "m.fp16.B", seed=2, median=150.0)
    # one run per version: run-to-run noise is not measured, so only a configured floor makes a
    # delta judgeable (in a config file: Snakemake's --config reads a nested number as a string)
    (tmp_path / "cmp.yaml").write_text("compare: {base: v1, head: v2, noise_rel: 0.1}\n")
    r = smk(
        tmp_path,
        "compare",
        "--configfile",
        "config/config.yaml",
        "cmp.yaml",
        "--config",
        "software_key=t",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = tmp_path / "results" / "compare" / "v1__vs__v2"
    for f in (
        "compare.html",
        "cdf.png",
        "delta.png",
        "compare.parquet",
        "points.parquet",
        "provenance.parquet",
    ):
        assert (out / f).stat().st_size > 0, f
    m = pd.read_parquet(out / "compare.parquet")
    assert m[(m["metric"] == "client_request_latency_ms") & (m["stat"] == "p50")][
        "significant"
    ].all()

    # without one configured, the rule configures no floor (run-to-run noise must be measured)
    r = smk(
        tmp_path,
        "-n",
        "-p",
        "-f",
        "compare",
        "--config",
        "software_key=t",
        "compare={base: v1, head: v2}",
    )
    assert r.returncode == 0 and "qualflow compare" in r.stdout and "--noise-rel" not in r.stdout, (
        r.stdout[-2000:]
    )

    r = smk(tmp_path, "-n", "compare", "--config", "software_key=t")
    assert r.returncode != 0 and "compare.base and compare.head must be set" in r.stdout + r.stderr
    r = smk(
        tmp_path, "-n", "compare", "--config", "software_key=t", "compare={base: v1, nonsense: 1}"
    )
    assert r.returncode != 0 and "'nonsense' was unexpected" in r.stdout + r.stderr
