"""Fixtures of the integration layer: the real qualify runs its tests share. The long independent
runs (two stacks, SLURM) are launched in the background when the shared tiny run starts, so that
their waits (servers and AIPerf starting, requests in flight) overlap the end-to-end tests'; each
test that reads one waits for it. The tests using these runs are one unit of work, and the first
to start (tests/conftest.py)."""

from __future__ import annotations

import shutil

import pytest

from fixtures.slurm import PROFILE, squeue, start_cluster, stop_cluster
from fixtures.snakemake import (
    TINY,
    TWO_STACKS_CONFIG,
    TWO_STACKS_KEY,
    Launched,
    copy_workflow,
    run_qualify,
)

BACKGROUND = ("two_stacks_launched", "slurm_launched")


@pytest.fixture(scope="session")
def tiny_qualify(request, tmp_path_factory):
    """The one real `snakemake qualify` of the tiny embedded config (fixtures.snakemake.TINY)
    that the end-to-end assertions share: those that only read its outputs read `.results`, the
    copy taken right after it; the end-to-end tests that run more there (a failed rung, a Ctrl-C
    and the rerun after it) run in `.wf`, in test_e2e.py's order. First launches the background
    runs that the selected tests read."""
    wanted = {name for item in request.session.items for name in item.fixturenames}
    for name in BACKGROUND:
        if name in wanted:
            try:
                request.getfixturevalue(name)
            except (Exception, pytest.skip.Exception, pytest.fail.Exception):
                pass  # cached by pytest: the tests that read it skip or fail with it then
    return run_qualify(copy_workflow(tmp_path_factory.mktemp("wf"), config=TINY))


@pytest.fixture(scope="session")
def two_stacks_launched(tmp_path_factory):
    """`snakemake qualify --configfile config/peer-transformers-cpu.yaml` (the README's two-stack
    command, under its own software key), in the background (None without the `transformers` CLI:
    the test says so)."""
    if shutil.which("transformers") is None:
        yield None
        return
    wf = tmp_path_factory.mktemp("two_stacks") / "wf"
    wf.mkdir()
    run = Launched(
        copy_workflow(wf, ("workflow", "config")),
        "qualify",
        "--configfile",
        TWO_STACKS_CONFIG,
        "--config",
        f"software_key={TWO_STACKS_KEY}",
        cores=2,
    )
    yield run
    run.stop()


@pytest.fixture(scope="session")
def cluster():
    """The one-node SLURM cluster (skips where there can be none); no job may be left at the end."""
    start_cluster()
    yield
    assert not squeue(), "jobs left in the queue"
    stop_cluster()


@pytest.fixture(scope="session")
def slurm_launched(cluster, tmp_path_factory):
    """The tiny qualify through SLURM (the `slurm-local` profile), in the background."""
    wf = copy_workflow(tmp_path_factory.mktemp("slurm_wf"), config=TINY)
    run = Launched(
        wf, "--workflow-profile", PROFILE, "qualify", "--configfile", "tiny.yaml", cores=None
    )
    yield run
    run.stop()
