"""The evidence tables of the shared tiny `snakemake qualify` run keep their column names, column
order and arrow types, and the run keeps its statuses: both compared with a committed snapshot,
tests/fixtures/evidence_schema.json, taken from the code before the issue-20 refactor.

How an all-empty column compares: parquet stores a column that holds no value in any row (an
object column of Nones, e.g. `client_error` when nothing failed) with arrow's `null` type, and
the snapshot records it as that, `null`. It compares like any other type, exactly: in this run
(fixed config, every request matched, every rung passed) which columns hold values is part of
what the tables hold, so a column that used to be filled and is now empty (a step that stopped
writing it), or one that used to be empty and now holds values, fails here as a type change; a
column empty in both compares equal. A change that is meant to change the tables regenerates the
snapshot: `QUALFLOW_WRITE_EVIDENCE_SCHEMA=1 python -m pytest
tests/integration/test_evidence_schema.py` writes it from the run (and skips), for the diff to be
reviewed. (The status table's columns output_tps, ttft_p50_ms and itl_p50_ms were added to the
snapshot with the change that added them to the table.)"""

from __future__ import annotations

import json
import os

import pandas as pd
import pyarrow.parquet as pq
import pytest

from fixtures import REPO
from fixtures.snakemake import SWKEY

SNAPSHOT = REPO / "tests" / "fixtures" / "evidence_schema.json"
TABLES = ("requests", "summary", "correctness", "protocol", "runs", "targets")
STATUS_KEY = ["model", "profile", "point_id"]

pytestmark = pytest.mark.slow


def arrow_schema(path) -> list[list[str]]:
    """[name, arrow type] of every column of a parquet file, in order."""
    return [[f.name, str(f.type)] for f in pq.read_schema(path).remove_metadata()]


def run_statuses(tsv) -> dict:
    """The status table's columns, and the status of each model/profile/point."""
    st = pd.read_csv(tsv, sep="\t")
    rows = st.sort_values(STATUS_KEY)[STATUS_KEY + ["status"]].to_dict("records")
    return {"columns": list(st.columns), "points": rows}


@pytest.fixture(scope="module")
def observed(tiny_qualify) -> dict:
    ev = tiny_qualify.evidence()
    found = {
        "tables": {t: arrow_schema(ev / f"{t}.parquet") for t in TABLES},
        "status": run_statuses(tiny_qualify.results / "status" / f"{SWKEY}.tsv"),
    }
    if os.environ.get("QUALFLOW_WRITE_EVIDENCE_SCHEMA") == "1":
        SNAPSHOT.write_text(json.dumps(found, indent=1) + "\n")
        pytest.skip(f"wrote {SNAPSHOT}")
    return found


@pytest.fixture(scope="module")
def snapshot() -> dict:
    return json.loads(SNAPSHOT.read_text())


@pytest.mark.parametrize("table", TABLES)
def test_evidence_table_keeps_its_columns_and_types(table, observed, snapshot):
    now, then = observed["tables"][table], snapshot["tables"][table]
    assert [n for n, _ in now] == [n for n, _ in then], (table, "columns or their order changed")
    changed = [(n, was, t) for (n, t), (_, was) in zip(now, then) if t != was]
    assert not changed, (table, "(column, snapshot type, type now):", changed)


def test_statuses_are_unchanged(observed, snapshot):
    assert observed["status"]["columns"] == snapshot["status"]["columns"]
    assert observed["status"]["points"] == snapshot["status"]["points"]
