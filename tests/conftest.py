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


# Two layers. The integration layer (tests/integration, and the cases marked `integration`, such as
# the store's on a real PostgreSQL) drives real Snakemake runs, SLURM and database servers; the unit
# layer is the rest (`pytest -m "not integration"`).
#
# Under pytest-xdist each module is one unit of work, so that its module-scoped fixtures (a real
# server, a workflow copy) are set up once; the modules whose tests share the integration layer's
# session runs are one unit, so that each run happens once. xdist's own `--dist loadgroup` would
# say this with marks, but it carries a group in the item's nodeid, which pytest 9 computes and no
# longer lets a plugin rewrite: the groups are lost. Hence `--dist loadscope` (pyproject) with the
# units of `unit_of`; collection checks that the tests using the shared runs are exactly those of
# SHARED_MODULES.
SHARED_MODULES = (
    "integration/test_e2e.py",
    "integration/test_evidence_schema.py",
    "integration/test_endpoint.py",
    "integration/test_slurm.py",
    "integration/test_chaos.py",
    "integration/test_sweep.py",
)
SHARED_RUNS = frozenset({"tiny_qualify", "two_stacks_launched", "slurm_launched", "cluster"})
BACKGROUND_RUNS = frozenset({"two_stacks_launched", "slurm_launched", "cluster"})
TESTS = Path(__file__).parent
INTEGRATION = TESTS / "integration"


def unit_of(nodeid: str) -> str:
    """The unit of work of a test under pytest-xdist: its module, or the shared runs."""
    module = nodeid.split("::", 1)[0].removeprefix("tests/")
    return "integration-shared-runs" if module in SHARED_MODULES else module


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadscope` with the units of `unit_of`, started in collection order
    (`--no-loadscope-reorder`)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return ModuleUnits(config, log)


def pytest_collection_modifyitems(config, items):
    """Marks the integration layer, then sets the order units start in (`.ci/run` runs `-n
    auto`): the shared runs first (their first test launches the long background runs, whose
    waits then overlap everything else), those waiting for a background run last in that unit;
    then the other integration modules; then the unit layer in collection order."""
    for item in items:
        if INTEGRATION in Path(item.path).parents or "postgres_url" in item.fixturenames:
            item.add_marker(pytest.mark.integration)

    def rank(item) -> int:
        names = set(item.fixturenames)
        shared = unit_of(item.nodeid) == "integration-shared-runs"
        assert shared == bool(names & SHARED_RUNS), (
            f"{item.nodeid}: a test uses the shared runs ({sorted(SHARED_RUNS)}) if and only if "
            "its module is in SHARED_MODULES (tests/conftest.py)"
        )
        if shared:
            return 1 if names & BACKGROUND_RUNS else 0
        return 2 if item.get_closest_marker("integration") else 3

    items.sort(key=rank)  # stable: the collection order within a rank
