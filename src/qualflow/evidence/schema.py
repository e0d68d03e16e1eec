"""Evidence table schemas: one schema version for all tables; every column documented (the
columns themselves live by table in schema_requests, schema_summary and schema_records;
docs/evidence.md names every one)."""

from __future__ import annotations

from qualflow.evidence.schema_key import SCHEMA_VERSION, STATUS_LADDER
from qualflow.evidence.schema_records import CORRECTNESS, PROTOCOL, RUNS, TARGETS
from qualflow.evidence.schema_requests import (
    REASONING_METRICS,
    REQUESTS,
    SERVER_METRICS,
    SUMMARY_METRICS,
)
from qualflow.evidence.schema_summary import SUMMARY, SUMMARY_PERCENTILES, SUMMARY_STATS

__all__ = [
    "REASONING_METRICS",
    "SCHEMA_VERSION",
    "SERVER_METRICS",
    "STATUS_LADDER",
    "SUMMARY_METRICS",
    "SUMMARY_PERCENTILES",
    "SUMMARY_STATS",
    "TABLES",
    "TABLE_NAMES",
    "conform",
]

TABLES = {
    "requests": REQUESTS,
    "summary": SUMMARY,
    "correctness": CORRECTNESS,
    "protocol": PROTOCOL,
    "runs": RUNS,
    "targets": TARGETS,
}
TABLE_NAMES = tuple(TABLES)  # the one list of evidence table names (one parquet file each)


# Text columns that may be null on every row of a run: stored as strings all the same, so that a
# table's arrow types do not depend on whether a run had, say, any AIPerf warning.
TEXT_COLUMNS = {"summary": ("aiperf_warnings", "cache_off_reasons", "roofline_reasons")}


def conform(df, table: str):
    """Order columns by the schema, add missing ones as null, refuse undocumented extras;
    TEXT_COLUMNS are strings whatever their values."""
    cols = list(TABLES[table])
    extra = [c for c in df.columns if c not in TABLES[table]]
    if extra:
        raise ValueError(f"{table}: undocumented columns {extra}")
    for c in cols:
        if c not in df.columns:
            df[c] = None
    for c in TEXT_COLUMNS.get(table, ()):
        df[c] = df[c].astype("string")
    return df[cols]
