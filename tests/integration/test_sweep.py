"""End-to-end: the real `snakemake` over an SLO sweep, in its own copy of the workflow: SLOs judged
per point, the max load meeting them per sweep, repeats with a CI, and a real prompt file as the
dataset's identity. It starts from a copy of the shared tiny run's results, as a user edits the
workloads after a qualify: only the points and the sessions are made again."""

from __future__ import annotations

import hashlib
import re

import pandas as pd
import pytest

from fixtures import REPO
from fixtures.snakemake import (
    SWKEY,
    copy_workflow,
    job_counts,
    pids_in,
    results_upstream_of_points,
    smk,
    sweep_config,
)
from qualflow.evidence import store
from qualflow.evidence.slo import max_load_meeting


@pytest.mark.slow
def test_slos_sweep_repeats_and_real_prompts(tiny_qualify, tmp_path):
    """One qualify over a concurrency sweep (c1 with the embedded default's SLOs, loosened, c2
    with an impossible TTFT bound) and the real-prompt workload with sampling as a Poisson rate
    point with `repeats: 2`: the points meeting their SLOs reach slo-met, c2 stops below naming
    the metric, each sweep reports its max load meeting the SLO, the repeats are two runs with a
    CI, and the prompt file's sha256 is in provenance. The passing points' bounds are the
    default's made unmissable (fixtures.snakemake.loose): what passes or fails does not depend
    on how loaded the machine is."""
    key = SWKEY  # its own copy and evidence
    wf = copy_workflow(tmp_path, config=sweep_config(), configfile="targets.yaml")
    results_upstream_of_points(tiny_qualify.results, wf)
    r = smk(wf, "qualify", "--configfile", "targets.yaml", cores=2, check=False)
    assert r.returncode != 0  # c2 is below slo-met
    jobs = job_counts(r.stdout + r.stderr)  # new workloads, same model: nothing built again
    assert jobs.get("aiperf_profile") == 1 and jobs.get("workload_points") == 1, jobs
    assert not {"build_bundle", "family_correctness", "embedded_checkpoint"} & set(jobs), jobs
    assert "below slo-met" in (wf / "logs" / "qualify" / f"{key}.log").read_text()
    ev = wf / "results" / "evidence" / key / "embedded" / "fp16"
    runs = pd.read_parquet(ev / "runs.parquet")
    st = runs.groupby("point_id")["status"].agg(set).to_dict()
    assert st == {
        "tiny_c1": {"slo-met"},
        "tiny_c2": {"aiperf-qualified"},
        "chat_r2": {"slo-met"},
    }, runs[["run_id", "point_id", "status", "status_reasons"]].to_string()
    why = runs.set_index("point_id").loc["tiny_c2", "status_reasons"]
    assert "SLO ttft_ms.p50 missed: client_ttft_ms_p50 <= 0.001 ms required, measured" in why
    # repeats: two runs of chat_r2 in the store, a CI in the targets
    chat = runs[runs["point_id"] == "chat_r2"]
    assert len(chat) == 2 and chat["run_id"].nunique() == 2
    assert {r.run_id for r in store.list_runs(wf / "results" / "evidence")} >= set(chat["run_id"])
    t = pd.read_parquet(ev / "targets.parquet")
    ttft = t[(t["point_id"] == "chat_r2") & (t["figure"] == "client_ttft_ms_p50")].iloc[0]
    assert ttft["n_repeats"] == 2 and ttft["ci_low"] <= ttft["mean"] <= ttft["ci_high"]
    # the prompt file is the dataset identity
    sha = hashlib.sha256(
        (REPO / "workloads" / "prompts" / "chat-v1.jsonl").read_bytes()
    ).hexdigest()
    assert set(chat["input_file_sha256"]) == {sha}
    summ = pd.read_parquet(ev / "summary.parquet")
    assert summ.set_index(["point_id", "repeat"]).loc[("chat_r2", 1), "load_kind"] == "request_rate"
    # max load meeting the SLO, per sweep, on the report's first screen
    html = (wf / "results" / "report" / key / "report.html").read_text()
    assert "Max load meeting the SLO" in html and "curves.png" in html and "breakdown.png" in html
    ml = max_load_meeting(runs, summ, "slo-met").set_index(["workload", "load_kind"])
    assert ml.loc[("tiny", "concurrency"), "max_load_meeting_slo"] == 1
    assert ml.loc[("tiny", "concurrency"), "first_load_missing"] == 2
    assert ml.loc[("chat", "request_rate"), "max_load_meeting_slo"] == 2
    log = (wf / "logs" / "aiperf_profile" / key / "embedded" / "fp16.log").read_text()
    assert re.search(r"progress chat_r2 repeat 2/2: \d+/5 requests, elapsed \d+s", log), log[-2000:]
    assert not pids_in(wf)
