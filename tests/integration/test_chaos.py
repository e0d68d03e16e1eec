"""A short seeded chaos run end to end (`qualflow chaos`, docs/chaos.md): one qualify cycle of the
tiny embedded config with the response store on and two faults (the store locked mid-run, then the
server SIGKILLed), checked and rerun; every check passes and the table is written. One cycle, as a
cycle is two serving sessions (the long run is in docs/chaos.md). It starts from the shared tiny
run's results (the bundle and correctness built), so that only the serving sessions run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import yaml

from fixtures import REPO
from fixtures.snakemake import TINY, WORKFLOW_FILES, smk_env

# the shared tiny run first, where no other test made it (minutes on 2 cores), then four sessions
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]
SEED = 5  # cycle 1: the store locked, then SIGKILL to the server
FAULTS = "signal:server,signal:session,signal:snakemake,signal:aiperf-worker,store-lock,disk-full"


def chaos(work, config, *flags, timeout=1800):
    cmd = [sys.executable, "-m", "qualflow.cli", "chaos", "--work", str(work)]
    cmd += ["--configfile", str(config), "--faults", FAULTS, "--seed", str(SEED), *flags]
    return subprocess.run(
        cmd, cwd=REPO, env=smk_env(), capture_output=True, text=True, timeout=timeout
    )


def test_a_short_seeded_chaos_run_passes_every_check(tiny_qualify, tmp_path):
    work = tmp_path / "work"
    wf = work / "wf"
    wf.mkdir(parents=True)
    for name in WORKFLOW_FILES:
        shutil.copytree(REPO / name, wf / name)
    shutil.copytree(tiny_qualify.results, wf / "results", symlinks=True)
    config = tmp_path / "tiny-state.yaml"
    cfg = json.loads(json.dumps(TINY))
    cfg["models"]["embedded"]["state"] = True
    config.write_text(yaml.safe_dump(cfg))

    dry = chaos(work, config, "--cycles", "2", "--dry-run")
    assert dry.returncode == 0 and "cycle 2:" in dry.stdout, dry.stdout + dry.stderr
    assert chaos(work, config, "--cycles", "2", "--dry-run").stdout == dry.stdout  # same seed
    assert "store-lock" in dry.stdout and "SIGKILL server" in dry.stdout

    r = chaos(work, config, "--cycles", "1", "--window-s", "3")
    out = r.stdout + r.stderr
    table = json.loads((work / "chaos.json").read_text())
    assert table["same_seed_same_schedule"] is True
    assert [c["cycle"] for c in table["cycles"]] == [1], out
    failed = [(c["cycle"], v) for c in table["cycles"] for v in c["verdicts"] if not v["ok"]]
    assert r.returncode == 0 and not failed, f"{failed}\n{out[-4000:]}"
    for c in table["cycles"]:  # every planned fault says what it did
        assert len(c["injected"]) >= len(c["planned"].split("; ")), c
