"""End-to-end: the real `snakemake` on a temp copy of the workflow with a tiny embedded workload.

Asserts the evidence accounting (AIPerf records = server records = joined profiling rows),
warm-up flagged, status aiperf-qualified, no server process or bound port left (after success and
after a Ctrl-C in the middle of a serving session), `-n` has nothing to do afterwards, and `-R
aiperf_profile` reruns the serving session and downstream but not pin/build/correctness; those
reading the outputs only share one run (the `tiny_qualify` fixture). The SLO sweep is
test_sweep.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from fixtures.snakemake import SWKEY, TINY, job_counts, pids_in, smk, smk_env
from qualflow.session.server_process import port_is_free

UPSTREAM = ("embedded_checkpoint", "pin_checkpoint", "build_bundle", "family_correctness")
DOWNSTREAM = ("aiperf_profile", "join_evidence", "report", "status", "qualify")


@pytest.mark.slow
def test_qualify_end_to_end(tiny_qualify):
    run = tiny_qualify
    ev, sess = run.evidence(), run.session()
    # the terminal ends with the verdict: the status table and the report's path
    tail = run.stdout.strip().splitlines()[-4:]
    assert tail[0] == "qualflow status:" and tail[1].split()[:2] == ["point", "rung"], tail
    assert tail[2].split()[:2] == ["embedded/fp16/tiny_c2", "aiperf-qualified"], tail
    assert tail[3] == f"report: results/report/{SWKEY}/report.html", tail
    req = pd.read_parquet(ev / "requests.parquet")
    summ = pd.read_parquet(ev / "summary.parquet")
    runs = pd.read_parquet(ev / "runs.parquet")
    point = "tiny_c2"

    # accounting: AIPerf records = server records = joined profiling rows
    aiperf_lines = [
        json.loads(ln)
        for ln in (sess / "points" / point / "aiperf" / "profile_export.jsonl")
        .read_text()
        .splitlines()
    ]
    aiperf_prof = {
        r["metadata"]["x_request_id"]
        for r in aiperf_lines
        if r["metadata"]["benchmark_phase"] == "profiling"
    }
    server = [json.loads(ln) for ln in (sess / "server_timing.jsonl").read_text().splitlines()]
    server_point = {r["request_id"] for r in server if r["tag"] == f"aiperf:{point}"}
    prof = req[req["phase"] == "profiling"]
    assert len(aiperf_prof) == 6
    assert set(prof["request_id"]) == aiperf_prof
    assert (prof["match_status"] == "matched").all()
    assert server_point - aiperf_prof == {
        r["metadata"]["x_request_id"]
        for r in aiperf_lines
        if r["metadata"]["benchmark_phase"] == "warmup"
    }
    s = summ.iloc[0]
    assert s["n_client"] == s["n_server"] == s["n_matched"] == 6
    assert s["n_client_only"] == 0 and s["n_server_only"] == 0
    # every server record is a requests row
    assert set(r["request_id"] for r in server) <= set(req["request_id"])
    assert len(req) == len({*req["request_id"]})
    # warm-up flagged (session warm-up + AIPerf warm-up), excluded from the summary
    warm = req[req["is_warmup"]]
    assert (warm["source"] == "session-warmup").sum() == 2 and (
        warm["source"] == "aiperf"
    ).sum() == 2
    assert s["n_warmup_excluded"] == 2
    # client vs server timing separate, difference computed
    assert prof["public_task_call_wall_ms"].notna().all() and prof["client_ttft_ms"].notna().all()
    assert (prof["client_minus_task_wall_ms"] > 0).all()
    # status and provenance
    assert runs.iloc[0]["status"] == "aiperf-qualified", runs.iloc[0]["status_reasons"]
    assert runs.iloc[0]["dataset_sha256"] and runs.iloc[0]["bundle_hash"]
    startup = json.loads((sess / "startup.json").read_text())
    assert startup["startup_s"] > 0 and startup["warmup_s"] > 0
    assert (run.results / "report" / SWKEY / "report.html").exists()
    assert (run.results / "status" / f"{SWKEY}.tsv").read_text().count("aiperf-qualified") == 1
    for rule in ("build_bundle", "family_correctness", "aiperf_profile"):
        assert list((run.results / "benchmarks" / rule).rglob("*.tsv")), rule
    # no server left, port free (as found right after the run)
    assert run.server_gone
    assert run.port_free
    assert not run.left
    print(f"\nqualify wall time on the tiny workload: {run.wall_s:.0f}s")


@pytest.mark.slow
def test_nothing_to_do_after_qualify_and_reruns_stay_downstream(tiny_qualify):
    """Dry runs in the copy the shared run left (before the tests below run more there)."""
    wf = tiny_qualify.wf
    # nothing to do afterwards
    r = smk(wf, "qualify", "--configfile", "tiny.yaml", "-n", cores=2, check=True)
    assert "Nothing to be done" in r.stdout + r.stderr, r.stdout[-2000:]

    # -R aiperf_profile: the session and downstream, nothing upstream
    r = smk(
        wf,
        "qualify",
        "--configfile",
        "tiny.yaml",
        "-n",
        "-R",
        "aiperf_profile",
        cores=2,
        check=True,
    )
    jobs = job_counts(r.stdout + r.stderr)
    assert all(jobs.get(j) == 1 for j in DOWNSTREAM), jobs
    assert not any(j in jobs for j in UPSTREAM), jobs

    # a workload change reruns the serving session and downstream only
    changed = json.loads(json.dumps(TINY))
    changed["workloads"]["tiny"]["osl"] = 9
    (wf / "tiny2.yaml").write_text(yaml.safe_dump(changed))
    r = smk(wf, "qualify", "--configfile", "tiny2.yaml", "-n", cores=2, check=True)
    jobs = job_counts(r.stdout + r.stderr)
    assert all(jobs.get(j) == 1 for j in DOWNSTREAM) and not any(j in jobs for j in UPSTREAM), jobs


@pytest.mark.slow
def test_no_stale_verdict_after_a_cut_off_session_or_an_edited_bundle(tiny_qualify):
    """Dry runs in the copy the shared run left, each state restored after it: the serving
    session's outputs gone but server.log (a `-R aiperf_profile` killed mid-session), and one
    byte changed in the bundle's weights. A plain `qualify` reruns the session (and, for the
    bundle, correctness), not the build; `qualflow status` already reads the evidence as stale.
    (Restored, the bundle has its old fingerprint again: the next test's run reruns nothing
    upstream.)"""
    from qualflow.report.page import main_status

    wf = tiny_qualify.wf
    sess = wf / "results" / "session" / SWKEY / "embedded" / "fp16"
    ev = wf / "results" / "evidence" / SWKEY / "embedded" / "fp16"
    aside = wf / "session-aside"
    sess.rename(aside)
    sess.mkdir()
    (sess / "server.log").write_text((aside / "server.log").read_text())
    try:
        r = smk(wf, "qualify", "--configfile", "tiny.yaml", "-n", cores=2, check=True)
    finally:
        shutil.rmtree(sess)
        aside.rename(sess)
    jobs = job_counts(r.stdout + r.stderr)
    assert all(jobs.get(j) == 1 for j in DOWNSTREAM) and not any(j in jobs for j in UPSTREAM), jobs

    weights = wf / "results" / "bundle" / SWKEY / "embedded" / "fp16" / "weights.safetensors"
    st, data = weights.stat(), weights.read_bytes()
    weights.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    try:
        r = smk(wf, "qualify", "--configfile", "tiny.yaml", "-n", cores=2, check=True)
        args = SimpleNamespace(evidence=[str(ev)], out=str(wf / "stale.tsv"), require=None)
        main_status(args)
    finally:
        weights.write_bytes(data)
        os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    jobs = job_counts(r.stdout + r.stderr)
    assert jobs.get("family_correctness") == 1 and all(jobs.get(j) == 1 for j in DOWNSTREAM), jobs
    assert "build_bundle" not in jobs and "Params have changed" in r.stdout + r.stderr, jobs
    stale = pd.read_csv(wf / "stale.tsv", sep="\t")
    assert set(stale["status"]) == {"planned"}, stale
    assert (
        stale["status_reasons"]
        .str.contains("weights.safetensors no longer matches its sha256")
        .all()
    )


@pytest.mark.slow
def test_a_failed_rung_still_writes_status_and_report(tiny_qualify):
    """Family correctness judged against thresholds the family does not have: the join records
    `implemented` with the reason, the report renders it, and `qualify` exits non-zero naming it."""
    wf = tiny_qualify.wf
    strict = json.loads(json.dumps(TINY))
    strict["models"]["embedded"]["thresholds_version"] = "qwen3-correctness-v999"
    (wf / "strict.yaml").write_text(yaml.safe_dump(strict))
    r = smk(wf, "qualify", "--configfile", "strict.yaml", cores=2, check=False)
    assert r.returncode != 0
    # the status table is kept, and the terminal ends with it and the report's path
    status = (wf / "results" / "status" / f"{SWKEY}.tsv").read_text()
    assert status.count("implemented") == 1 and "thresholds changed" in status, status
    assert not (wf / "results" / "status" / f"{SWKEY}.verdict").exists()
    tail = r.stdout.strip().splitlines()[-2:]
    assert (
        tail[0].split()[:2] == ["embedded/fp16/tiny_c2", "implemented"]
        and "thresholds changed" in tail[0]
    ), tail
    assert tail[1] == f"report: results/report/{SWKEY}/report.html", tail
    jobs = job_counts(r.stdout + r.stderr)
    assert not any(j in jobs for j in UPSTREAM + ("aiperf_profile",)), jobs
    runs = pd.read_parquet(
        wf / "results" / "evidence" / SWKEY / "embedded" / "fp16" / "runs.parquet"
    )
    assert runs.iloc[0]["status"] == "implemented"
    assert (
        "thresholds changed: applied qwen3-correctness-v1, expected qwen3-correctness-v999"
        in runs.iloc[0]["status_reasons"]
    )
    html = (wf / "results" / "report" / SWKEY / "report.html").read_text()
    assert "thresholds changed" in html
    assert (
        "below aiperf-qualified"
        in r.stdout + r.stderr + (wf / "logs" / "qualify" / f"{SWKEY}.log").read_text()
    )
    # No run back to the passing config here: the tests that follow rerun the session and
    # everything downstream of it with tiny.yaml (-R aiperf_profile, then the plain rerun), which
    # remakes what this strict run wrote.


@pytest.mark.slow
def test_ctrl_c_during_serving_session_leaves_no_server(tiny_qualify):
    """Real `-R aiperf_profile` run, interrupted (SIGINT to the process group, like a terminal
    Ctrl-C) once the server is up; the run starts only downstream jobs, and nothing is left
    running."""
    wf = tiny_qualify.wf
    sess = wf / "results" / "session" / SWKEY / "embedded" / "fp16"
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--cores",
        "2",
        "qualify",
        "--configfile",
        "tiny.yaml",
        "-R",
        "aiperf_profile",
    ]
    for old in (wf / "logs" / "aiperf_profile").rglob("*.log"):
        old.unlink()  # so that the server pid read below is the new one
    log = open(wf / "interrupted.log", "w")
    p = subprocess.Popen(
        cmd, cwd=wf, env=smk_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    job_log = wf / "logs" / "aiperf_profile" / SWKEY / "embedded" / "fp16.log"
    deadline = time.monotonic() + 300
    pid = None
    while time.monotonic() < deadline and p.poll() is None:
        text = job_log.read_text() if job_log.exists() else ""
        m = re.search(r"server pid (\d+) starting at http://[\d.]+:(\d+)", text)
        if m and (sess / "warmup.parquet").exists():
            pid, port = int(m.group(1)), int(m.group(2))
            break
        time.sleep(0.5)
    assert pid is not None, (wf / "interrupted.log").read_text()[-3000:]
    os.killpg(p.pid, signal.SIGINT)
    rc = p.wait(timeout=120)
    log.close()
    out = (wf / "interrupted.log").read_text()
    jobs = job_counts(out)
    assert not any(j in jobs for j in UPSTREAM), jobs
    assert rc != 0
    time.sleep(1)
    assert (
        not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    )
    assert port_is_free("127.0.0.1", port)
    assert not pids_in(wf)
    assert "session: server stopped" in job_log.read_text()


@pytest.mark.slow
def test_plain_rerun_after_ctrl_c_completes(tiny_qualify):
    """After the Ctrl-C above cut the serving session off, a plain `snakemake qualify` (no
    --rerun-incomplete) completes: the default profile's rerun-incomplete is in effect."""
    wf = tiny_qualify.wf
    if not (wf / "interrupted.log").exists():
        pytest.skip("needs the Ctrl-C run first")
    r = smk(wf, "qualify", "--configfile", "tiny.yaml", cores=2, check=False)
    out = r.stdout + r.stderr
    assert "IncompleteFilesException" not in out, out[-3000:]
    assert r.returncode == 0, out[-3000:]
    assert "Using workflow specific profile workflow/profiles/default" in out
    assert job_counts(out).get("aiperf_profile") == 1
    assert (wf / "results" / "status" / f"{SWKEY}.tsv").read_text().count("aiperf-qualified") == 1
