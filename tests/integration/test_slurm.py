"""The qualify DAG through a real SLURM cluster: a one-node cluster on this machine
(tests/slurm/cluster.sh), snakemake-executor-plugin-slurm, the `slurm-local` profile.

Checks that the embedded default (the end-to-end test's tiny workload) ends `aiperf-qualified`, that
its evidence tables have the same schema, row counts and accounting as a local run's (the shared
run of the end-to-end tests), that no job and no server is left, and that an `scancel`
of the serving-session job fails the DAG with a message and leaves no server behind.

Where SLURM cannot be set up (not root, no apt-get, no plugin) the tests are skipped with the
reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fixtures.slurm import PROFILE, squeue
from fixtures.snakemake import SWKEY, job_counts, pids_in, smk_env

TABLES = ("requests", "summary", "correctness", "protocol", "runs")
ACCOUNTING = (
    "request_count",
    "n_client",
    "n_server",
    "n_matched",
    "n_client_only",
    "n_server_only",
    "n_errors",
    "n_server_osl_mismatch",
    "n_warmup_excluded",
    "status",
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_evidence(tiny_qualify):
    """The evidence of a local run of the same config: the shared one of the end-to-end tests."""
    return tiny_qualify.evidence()


@pytest.fixture(scope="module")
def slurm_wf(slurm_launched):
    """The SLURM qualify (started in the background with the end-to-end tests,
    workflow/conftest.py)."""
    run = slurm_launched.wait()
    print(f"\nqualify through SLURM (tiny workload): {run.wall_s:.0f}s")
    return slurm_launched.cwd, run.output


def test_qualify_through_slurm_matches_local(local_evidence, slurm_wf):
    wf, out = slurm_wf
    # the heavy rules were SLURM jobs, the light ones local
    submitted = set(
        re.findall(
            r"rule_(\w+)/", "\n".join(re.findall(r"has been submitted with SLURM jobid .*", out))
        )
    )
    assert submitted == {"build_bundle", "family_correctness", "aiperf_profile"}, submitted
    for light in ("pin_checkpoint", "join_evidence", "report", "status", "qualify"):
        assert re.search(rf"^localrule {light}:", out, re.M), light
    status = (wf / "results" / "status" / f"{SWKEY}.tsv").read_text()
    assert status.count("aiperf-qualified") == 1, status

    ev = wf / "results" / "evidence" / SWKEY / "embedded" / "fp16"
    for t in TABLES:
        s_slurm = pq.read_schema(ev / f"{t}.parquet").remove_metadata()
        s_local = pq.read_schema(local_evidence / f"{t}.parquet").remove_metadata()
        # same columns in the same order, same types wherever both runs hold values (a column that
        # is empty in one run, e.g. no failure reasons, is stored with parquet's null type)
        assert s_slurm.names == s_local.names, (t, s_slurm.names, s_local.names)
        differ = [
            (a.name, str(a.type), str(b.type))
            for a, b in zip(s_slurm, s_local)
            if a.type != b.type and not (pa.types.is_null(a.type) or pa.types.is_null(b.type))
        ]
        assert not differ, (t, differ)
        assert (
            pq.read_metadata(ev / f"{t}.parquet").num_rows
            == pq.read_metadata(local_evidence / f"{t}.parquet").num_rows
        ), t
    summ_s = pd.read_parquet(ev / "summary.parquet").set_index("point_id")[list(ACCOUNTING)]
    summ_l = pd.read_parquet(local_evidence / "summary.parquet").set_index("point_id")[
        list(ACCOUNTING)
    ]
    pd.testing.assert_frame_equal(summ_s, summ_l)
    keys = ["phase", "source", "is_warmup", "match_status"]
    req_s = pd.read_parquet(ev / "requests.parquet").groupby(keys, dropna=False).size()
    req_l = pd.read_parquet(local_evidence / "requests.parquet").groupby(keys, dropna=False).size()
    pd.testing.assert_series_equal(req_s, req_l)
    runs = pd.read_parquet(ev / "runs.parquet")
    assert (runs["status"] == "aiperf-qualified").all(), runs["status_reasons"].tolist()
    assert (
        runs["dataset_sha256"].tolist()
        == pd.read_parquet(local_evidence / "runs.parquet")["dataset_sha256"].tolist()
    )

    # nothing left: no job in the queue, no server / session / AIPerf process
    assert not squeue()
    assert not pids_in(wf, r"qualflow|aiperf|snakemake")


def test_scancel_of_the_session_fails_the_dag_and_leaves_no_server(slurm_wf):
    """An scancel of the serving-session job once its server is up: the session stops its server
    inside the allocation (SIGTERM from slurmstepd), the DAG fails naming the job, nothing is
    left."""
    wf, _ = slurm_wf
    job_log = wf / "logs" / "aiperf_profile" / SWKEY / "embedded" / "fp16.log"
    sess = wf / "results" / "session" / SWKEY / "embedded" / "fp16"
    job_log.unlink()
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--workflow-profile",
        PROFILE,
        "qualify",
        "--configfile",
        "tiny.yaml",
        "-R",
        "aiperf_profile",
    ]
    with open(wf / "cancelled.log", "w") as log:
        p = subprocess.Popen(
            cmd, cwd=wf, env=smk_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            deadline = time.monotonic() + 400
            pid = None
            while time.monotonic() < deadline and p.poll() is None:
                text = job_log.read_text() if job_log.exists() else ""
                m = re.search(r"server pid (\d+) starting at http://[\d.]+:(\d+)", text)
                if m and (sess / "warmup.parquet").exists():
                    pid = int(m.group(1))
                    break
                time.sleep(0.5)
            assert pid is not None, (wf / "cancelled.log").read_text()[-3000:]
            jobs = squeue()
            assert len(jobs) == 1, jobs
            jobid = jobs[0].split()[0]
            subprocess.run(["scancel", jobid], check=True, timeout=60)
            rc = p.wait(timeout=400)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, 2)
                p.wait(timeout=120)
    out = (wf / "cancelled.log").read_text()
    assert rc != 0, out[-3000:]
    assert re.search(
        rf"Error in rule aiperf_profile:.*SLURM-job '{jobid}' failed, SLURM status is: 'CANCELLED'",
        out,
        re.S,
    ), out[-3000:]
    jobs = job_counts(out)
    assert "family_correctness" not in jobs and "build_bundle" not in jobs, jobs
    time.sleep(1)
    assert (
        not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    )
    assert "session: server stopped" in job_log.read_text()
    assert not squeue()
    assert not pids_in(wf, r"qualflow|aiperf|snakemake")
