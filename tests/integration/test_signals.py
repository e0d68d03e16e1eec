"""A signal sent to the Snakemake PID alone (`kill`, `timeout`, a CI cancellation; not a terminal's
Ctrl-C, which signals the whole group) stops a running serving session within 15 s (AIPerf stops
gracefully) and leaves no process; so does Snakemake's own death; a plain rerun then completes.

The real `snakemake` and a real session (server + AIPerf) on the shared tiny bundle, through a
one-rule Snakefile with the workflow's own signal hook and the session rule's `exec` form, so that
no pin/build/correctness has to run first."""

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

import pytest

from fixtures import REPO
from fixtures.snakemake import pids_in, smk, smk_env
from qualflow.aiperf.command import AiperfPoint
from qualflow.workload import PointPlan

POINT = "sig_c1"
# a session stops within 15 s of the signal
pytestmark = pytest.mark.timing
SNAKEFILE = """\
from qualflow.lifetime import pass_signals_to_jobs

onstart:
    pass_signals_to_jobs()

rule session:
    input: points="points.json"
    output: session="session/session.json"
    log: "logs/session.log"
    shell:
        "exec qualflow session --bundle {bundle} --out session --points {{input.points}}"
        " --device cpu --warmup-requests 1 --warmup-max-tokens 4 --no-protocol"
        " --startup-timeout 300 --cpu-threads 1"
        " --run-name embedded fp16 --archive-dir history > {{log}} 2>&1"
"""


def write_points(wf: Path, request_count: int, osl: int) -> None:
    point = AiperfPoint(
        point_id=POINT,
        concurrency=1,
        isl=16,
        osl=osl,
        request_count=request_count,
        warmup_request_count=1,
        workload="sig",
    )
    PointPlan(points=(point,), slos={}).write(wf / "points.json")


@pytest.fixture(scope="module")
def wf(tmp_path_factory, bundle_dir):
    d = tmp_path_factory.mktemp("wfsig")
    (d / "Snakefile").write_text(SNAKEFILE.format(bundle=bundle_dir))
    (d / "profiles" / "default").mkdir(
        parents=True
    )  # the workflow's default profile (rerun-incomplete)
    shutil.copy(
        REPO / "workflow" / "profiles" / "default" / "config.yaml", d / "profiles" / "default"
    )
    return d


def test_the_workflow_passes_signals_on():
    """The real Snakefile installs the hook the runs below exercise."""
    text = (REPO / "workflow" / "Snakefile").read_text()
    assert re.search(r"^onstart:\n\s+pass_signals_to_jobs\(\)", text, re.M)


def start_and_wait_for_aiperf(wf: Path) -> subprocess.Popen:
    """Snakemake in its own group (only its PID is signalled below), once AIPerf is measuring."""
    job_log = wf / "logs" / "session.log"
    job_log.unlink(missing_ok=True)  # the previous case's
    log = open(wf / "smk.log", "w")
    p = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--cores", "1"],
        cwd=wf,
        env=smk_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and p.poll() is None:
        if job_log.exists() and "progress" in job_log.read_text():  # AIPerf has requests done
            return p
        time.sleep(0.3)
    p.kill()
    pytest.fail(
        f"AIPerf never started:\n{(wf / 'smk.log').read_text()[-3000:]}\n"
        f"{job_log.read_text()[-3000:] if job_log.exists() else ''}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_signal_to_snakemake_alone_stops_the_session(wf, sig):
    write_points(wf, request_count=2000, osl=16)  # minutes of measurement if nothing stops it
    p = start_and_wait_for_aiperf(wf)
    t0 = time.monotonic()
    os.kill(p.pid, sig)
    # AIPerf is stopped gracefully (SIGINT: it still writes its exports), which takes a few seconds
    # of its seven processes on a loaded 2-core machine (5.1 s was seen beside the background
    # workflow runs); a session that did not stop would measure for minutes (2,000 requests)
    deadline = t0 + 15
    while time.monotonic() < deadline and (p.poll() is None or pids_in(wf)):
        time.sleep(0.1)
    took = time.monotonic() - t0
    left = pids_in(wf)
    for line in left:  # do not leave them to the next case
        os.kill(int(line.split(":")[0]), signal.SIGKILL)
    assert p.poll() is not None and not left, f"{sig!r}: after {took:.1f}s still running: {left}"
    assert p.returncode != 0
    log = (wf / "logs" / "session.log").read_text()
    assert "session: server stopped" in log, log[-3000:]
    if (
        sig != signal.SIGKILL
    ):  # a killed Snakemake: the session gets SIGTERM from the kernel (PDEATHSIG)
        assert f"received {sig.name}" in log, log[-3000:]


@pytest.mark.slow
def test_a_plain_rerun_after_the_signals_completes(wf):
    if not (wf / "smk.log").exists():
        pytest.skip("needs the interrupted runs first")
    write_points(wf, request_count=2, osl=4)
    smk(wf, "--unlock", cores=1, check=True)  # what Snakemake asks for after it was SIGKILLed
    r = smk(wf, cores=1, timeout=600, check=True)
    assert "IncompleteFilesException" not in r.stdout + r.stderr
    record = json.loads((wf / "session" / "session.json").read_text())
    assert record.get("error") is None, record.get("error")
    assert not pids_in(wf)
