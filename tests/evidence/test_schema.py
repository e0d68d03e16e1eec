"""docs/evidence.md documents every evidence column; tables refuse undocumented columns."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from fixtures import REPO
from qualflow.evidence.schema import TABLES, conform

EVIDENCE_PAGE = REPO / "docs" / "evidence.md"


def test_the_evidence_page_lists_every_column():
    text = EVIDENCE_PAGE.read_text()
    for table, cols in TABLES.items():
        assert f"`{table}.parquet`" in text, table
        for c in cols:
            base = re.sub(r"_(mean|p50|p90|p99)$", "", c) if table == "summary" else c
            assert f"`{c}`" in text or base in text, (table, c)


def test_conform_orders_and_refuses_extras():
    df = conform(pd.DataFrame([{"name": "x", "passed": True}]), "protocol")
    assert list(df.columns) == list(TABLES["protocol"]) and df["detail"].isna().all()
    with pytest.raises(ValueError, match="undocumented"):
        conform(pd.DataFrame([{"name": "x", "surprise": 1}]), "protocol")


def test_a_text_column_null_on_every_row_is_still_stored_as_text(tmp_path):
    """A run without any AIPerf warning writes the same arrow type as a run with one."""
    import pyarrow.parquet as pq

    from qualflow.evidence.store import write_table

    types = []
    for warnings in (None, "OSL mismatch"):
        df = conform(pd.DataFrame([{"aiperf_warnings": warnings}]), "summary")
        write_table(df, tmp_path / "s.parquet")
        types.append(str(pq.read_schema(tmp_path / "s.parquet").field("aiperf_warnings").type))
    assert types == ["string", "string"]
