"""The qualify DAG through a real SLURM cluster: a one-node cluster on this machine
(tests/slurm/cluster.sh), snakemake-executor-plugin-slurm, the `slurm-local` profile.

Checks that the embedded default (the end-to-end test's tiny workload) ends `aiperf-qualified`, that
its evidence tables have the same schema, row counts and accounting as a local run's (the shared
run of the end-to-end tests), that no job and no server is left, and that an `scancel`
of the serving-session job fails the DAG with a message and leaves no server behind.

Where SLURM cannot be set up (not root, no apt-get, no plugin) the tests are skipped with the reason.
"""
from __future__ import annotations

import importlib.util
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

from fixtures import REPO
from fixtures.snakemake import SWKEY, TINY, copy_workflow, job_counts, pids_in, smk, smk_env

CLUSTER = REPO / "tests" / "slurm" / "cluster.sh"
PROFILE = "workflow/profiles/slurm-local"
TABLES = ("requests", "summary", "correctness", "protocol", "runs")
ACCOUNTING = ("request_count", "n_client", "n_server", "n_matched", "n_client_only", "n_server_only",
              "n_errors", "n_server_osl_mismatch", "n_warmup_excluded", "status")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        pytest.skip("snakemake-executor-plugin-slurm is not installed (pip install -e '.[slurm]')")
    r = subprocess.run(["bash", str(CLUSTER), "start"], capture_output=True, text=True, timeout=600)
    if r.returncode == 3:
        pytest.skip(f"no SLURM cluster here: {r.stderr.strip()}")
    assert r.returncode == 0, f"cluster.sh start failed:\n{r.stdout}\n{r.stderr}"
    yield
    assert not _squeue(), "jobs left in the queue"
    subprocess.run(["bash", str(CLUSTER), "stop"], capture_output=True, text=True, timeout=120)


def _squeue() -> list[str]:
    r = subprocess.run(["squeue", "-h", "-o", "%i %j %T"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [ln for ln in r.stdout.splitlines() if ln.strip()]


@pytest.fixture(scope="module")
def local_evidence(tiny_qualify):
    """The evidence of a local run of the same config: the shared one of the end-to-end tests."""
    return tiny_qualify.evidence()


@pytest.fixture(scope="module")
def slurm_wf(cluster, tmp_path_factory):
    wf = copy_workflow(tmp_path_factory.mktemp("slurm_wf"), config=TINY)
    t0 = time.monotonic()
    r = smk(wf, "--workflow-profile", PROFILE, "qualify", "--configfile", "tiny.yaml", cores=None, check=True)
    wall = time.monotonic() - t0
    print(f"\nqualify through SLURM (tiny workload): {wall:.0f}s")
    return wf, r.stdout + r.stderr


def test_qualify_through_slurm_matches_local(slurm_wf, local_evidence):
    wf, out = slurm_wf
    # the heavy rules were SLURM jobs, the light ones local
    submitted = set(re.findall(r"rule_(\w+)/", "\n".join(re.findall(r"has been submitted with SLURM jobid .*", out))))
    assert submitted == {"build_bundle", "family_correctness", "aiperf_profile"}, submitted
    for light in ("pin_checkpoint", "join_evidence", "report", "status", "qualify"):
        assert re.search(rf"^localrule {light}:", out, re.M), light
    status = (wf / "results" / "status" / f"{SWKEY}.tsv").read_text()
    assert status.count("aiperf-qualified") == 1, status

    ev = wf / "results" / "evidence" / SWKEY / "embedded" / "fp16"
    for t in TABLES:
        s_slurm = pq.read_schema(ev / f"{t}.parquet").remove_metadata()
        s_local = pq.read_schema(local_evidence / f"{t}.parquet").remove_metadata()
        # same columns in the same order, same types wherever both runs hold values (a column that is
        # empty in one run, e.g. no failure reasons, is stored with parquet's null type)
        assert s_slurm.names == s_local.names, (t, s_slurm.names, s_local.names)
        differ = [(a.name, str(a.type), str(b.type)) for a, b in zip(s_slurm, s_local)
                  if a.type != b.type and not (pa.types.is_null(a.type) or pa.types.is_null(b.type))]
        assert not differ, (t, differ)
        assert pq.read_metadata(ev / f"{t}.parquet").num_rows == pq.read_metadata(
            local_evidence / f"{t}.parquet").num_rows, t
    summ_s = pd.read_parquet(ev / "summary.parquet").set_index("point_id")[list(ACCOUNTING)]
    summ_l = pd.read_parquet(local_evidence / "summary.parquet").set_index("point_id")[list(ACCOUNTING)]
    pd.testing.assert_frame_equal(summ_s, summ_l)
    keys = ["phase", "source", "is_warmup", "match_status"]
    req_s = pd.read_parquet(ev / "requests.parquet").groupby(keys, dropna=False).size()
    req_l = pd.read_parquet(local_evidence / "requests.parquet").groupby(keys, dropna=False).size()
    pd.testing.assert_series_equal(req_s, req_l)
    runs = pd.read_parquet(ev / "runs.parquet")
    assert (runs["status"] == "aiperf-qualified").all(), runs["status_reasons"].tolist()
    assert runs["dataset_sha256"].tolist() == pd.read_parquet(local_evidence / "runs.parquet")["dataset_sha256"].tolist()

    # nothing left: no job in the queue, no server / session / AIPerf process
    assert not _squeue()
    assert not pids_in(wf, r"qualflow|aiperf|snakemake")


def test_scancel_of_the_session_fails_the_dag_and_leaves_no_server(slurm_wf):
    """An scancel of the serving-session job once its server is up: the session stops its server
    inside the allocation (SIGTERM from slurmstepd), the DAG fails naming the job, nothing is left."""
    wf, _ = slurm_wf
    job_log = wf / "logs" / "aiperf_profile" / SWKEY / "embedded" / "fp16.log"
    sess = wf / "results" / "session" / SWKEY / "embedded" / "fp16"
    job_log.unlink()
    cmd = [sys.executable, "-m", "snakemake", "--workflow-profile", PROFILE, "qualify", "--configfile", "tiny.yaml",
           "-R", "aiperf_profile"]
    with open(wf / "cancelled.log", "w") as log:
        p = subprocess.Popen(cmd, cwd=wf, env=smk_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
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
            jobs = _squeue()
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
    assert re.search(rf"Error in rule aiperf_profile:.*SLURM-job '{jobid}' failed, SLURM status is: 'CANCELLED'",
                     out, re.S), out[-3000:]
    jobs = job_counts(out)
    assert "family_correctness" not in jobs and "build_bundle" not in jobs, jobs
    time.sleep(1)
    assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    assert "session: server stopped" in job_log.read_text()
    assert not _squeue()
    assert not pids_in(wf, r"qualflow|aiperf|snakemake")
