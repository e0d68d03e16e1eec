"""Fixtures of the workflow tests."""
from __future__ import annotations

import pytest

from fixtures.snakemake import TINY, copy_workflow, run_qualify


@pytest.fixture(scope="module")
def wf(tmp_path_factory):
    """A copy of the workflow, so that runs in the checkout (and their lock) do not interfere."""
    return copy_workflow(tmp_path_factory.mktemp("wfstatic"))


@pytest.fixture(scope="session")
def tiny_qualify(tmp_path_factory):
    """The one real `snakemake qualify` of the tiny embedded config (fixtures.snakemake.TINY) that the
    end-to-end assertions share: those that only read its outputs read `.results`, the copy taken
    right after it; the end-to-end tests that run more (a failed rung, a Ctrl-C, the SLO sweep) run
    in `.wf`, in test_e2e.py's order."""
    return run_qualify(copy_workflow(tmp_path_factory.mktemp("wf"), config=TINY))
