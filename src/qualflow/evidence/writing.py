"""Writing a session's evidence: every table into the evidence directory (all the session's runs)
and each run's into history/<run_id>/ (evidence.store)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from qualflow.evidence.schema import TABLES, conform
from qualflow.evidence.store import HISTORY, write_table


@dataclass(frozen=True, eq=False)
class JoinedTables:
    """The session's run id and the tables joined once for all its points."""

    run_id: str
    requests: pd.DataFrame
    correctness: pd.DataFrame
    protocol: pd.DataFrame


def _run_tables(rid, session_run_id, req, summ, corr, proto, runs, targ) -> dict[str, pd.DataFrame]:
    """The tables of one run id: its own requests, summary and runs rows; the session's correctness
    and protocol results (a repeat run carries them under its own id, so it stands alone); the
    across-repeat targets only with the session's run id."""

    def own(df):
        return df[df["run_id"] == rid].reset_index(drop=True)

    return {
        "requests": own(req),
        "summary": own(summ),
        "runs": own(runs),
        "correctness": corr.assign(run_id=rid),
        "protocol": proto.assign(run_id=rid),
        "targets": own(targ) if rid == session_run_id else targ.iloc[0:0],
    }


def write_evidence(
    out: Path, j: JoinedTables, summaries: list[dict], runs: list[dict], targets: list[dict]
) -> dict:
    """Every table into `out` (all the session's runs), and each run's into out/history/<run_id>/
    (never overwritten by another run); returns the result `qualflow join` prints."""
    summ, runs_df, targ = (
        conform(pd.DataFrame(rows), name)
        for rows, name in ((summaries, "summary"), (runs, "runs"), (targets, "targets"))
    )
    run_ids = list(dict.fromkeys([j.run_id, *runs_df["run_id"]]))
    per_run = {
        rid: _run_tables(rid, j.run_id, j.requests, summ, j.correctness, j.protocol, runs_df, targ)
        for rid in run_ids
    }
    tables = {t: pd.concat([per_run[r][t] for r in run_ids], ignore_index=True) for t in TABLES}
    for name, df in tables.items():
        write_table(df, out / f"{name}.parquet")
    for rid, tabs in per_run.items():
        dest = out / HISTORY / rid
        dest.mkdir(parents=True, exist_ok=True)
        for name, df in tabs.items():
            write_table(df, dest / f"{name}.parquet")
    return {
        "run_id": j.run_id,
        "run_ids": run_ids,
        "statuses": {r["point_id"]: r["status"] for r in runs if r["run_id"] == j.run_id},
        "counts": {n: len(d) for n, d in tables.items()},
    }
