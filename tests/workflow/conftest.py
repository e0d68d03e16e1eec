"""Fixtures of the workflow tests that parse, lint and dry-run the workflow (no job runs)."""

from __future__ import annotations

import pytest

from fixtures.snakemake import copy_workflow


@pytest.fixture(scope="module")
def wf(tmp_path_factory):
    """A copy of the workflow, so that runs in the checkout (and their lock) do not interfere."""
    return copy_workflow(tmp_path_factory.mktemp("wfstatic"))
