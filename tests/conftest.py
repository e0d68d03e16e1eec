"""Shared fixtures: the embedded default checkpoint, its pin and its fp16 bundle (built once per
session, in-process, offline). The shared builders (tests/fixtures) assert too: pytest rewrites
their asserts as it does the tests'."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.register_assert_rewrite("fixtures")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# One OpenMP thread per process unless told otherwise (inherited by every process a test starts):
# the suite runs a worker per core beside the servers, sessions and Snakemake jobs it starts, and
# torch's default pool of a thread per core in each of them spins against the others. On this 2-core
# machine tests/runtime + tests/correctness took 88 s and 167 CPU-s with the default pools, 69 s and
# 127 CPU-s with one thread. A process given explicit threads (`--cpu-threads`, `cpu_threads`) still
# gets them.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def embedded_dir(tmp_path_factory):
    """Path of the embedded default (tiny) checkpoint."""
    from qualflow.families.qwen3.synthetic import write_embedded

    return write_embedded(tmp_path_factory.mktemp("embedded") / "checkpoint", "tiny")


@pytest.fixture(scope="session")
def pinned(embedded_dir, tmp_path_factory):
    """Path of pin.json for the embedded default."""
    from qualflow.artifacts.pin import pin_checkpoint, write_pin

    return write_pin(pin_checkpoint(str(embedded_dir)), tmp_path_factory.mktemp("pin") / "pin.json")


@pytest.fixture(scope="session")
def bundle_dir(pinned, tmp_path_factory):
    """Path of the fp16 bundle built from the embedded default."""
    from qualflow.artifacts.bundle import build_bundle

    out = tmp_path_factory.mktemp("bundle") / "fp16"
    build_bundle(pinned, "fp16", out)
    return out


# The modules whose tests share the workflow tests' session runs (tests/workflow/conftest.py): under
# pytest-xdist they are one unit of work, so that each run happens once. Collection checks that the
# tests using the runs (SHARED_RUNS) are exactly those of these modules.
SHARED_MODULES = (
    "workflow/test_e2e.py",
    "workflow/test_evidence_schema.py",
    "workflow/test_endpoint.py",
    "workflow/test_slurm.py",
)
SHARED_RUNS = frozenset({"tiny_qualify", "two_stacks_launched", "slurm_launched", "cluster"})
BACKGROUND_RUNS = frozenset({"two_stacks_launched", "slurm_launched", "cluster"})
TESTS = Path(__file__).parent


def unit_of(nodeid: str) -> str:
    """The unit of work of a test under pytest-xdist: its module, or the shared workflow runs."""
    module = nodeid.split("::", 1)[0].removeprefix("tests/")
    return "workflow-shared" if module in SHARED_MODULES else module


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadscope` (pyproject's addopts) with the units of `unit_of`: each module one
    unit, so that its module-scoped fixtures (a real server, a workflow copy) are set up once,
    and the shared workflow runs one unit. Units start in collection order
    (`--no-loadscope-reorder`)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return ModuleUnits(config, log)


def pytest_collection_modifyitems(config, items):
    """The order units start in (`.ci/run` runs `-n auto`): the shared workflow runs first (their
    first test launches the long background runs, whose waits then overlap everything else),
    those waiting for a background run last in that unit; then the other workflow modules; then
    the rest in collection order. Without xdist the order is the same."""

    def rank(item) -> int:
        names = set(item.fixturenames)
        shared = unit_of(item.nodeid) == "workflow-shared"
        assert shared == bool(names & SHARED_RUNS), (
            f"{item.nodeid}: a test uses the shared workflow runs ({sorted(SHARED_RUNS)}) if and "
            "only if its module is in SHARED_MODULES (tests/conftest.py)"
        )
        if shared:
            return 1 if names & BACKGROUND_RUNS else 0
        return 2 if unit_of(item.nodeid).startswith("workflow/") else 3

    items.sort(key=rank)  # stable: the collection order within a rank
