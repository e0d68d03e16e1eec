"""A point's samples: the profiling rows that carry a request's figures, the one definition both the
`summary` table and `qualflow compare` take their per-request figures from.

- With server timing (our server): the matched profiling rows (warm-up excluded). A client-only row
  there is an accounting failure, not a sample.
- Without server timing (an external endpoint): its rows are client-only by design, so its samples
  are its client-only profiling rows without an error; the server-side metrics (`SERVER_METRICS`)
  stay null for it."""

from __future__ import annotations

from collections.abc import Collection

import pandas as pd

from qualflow.evidence.schema import SERVER_METRICS

SERVER_TIMING_UNAVAILABLE = "unavailable"  # runs.server_timing of a run without server records


def runs_without_server_timing(runs: pd.DataFrame) -> set[str]:
    """Run ids whose server timing is unavailable (accounted on the client side)."""
    if runs.empty or "server_timing" not in runs:
        return set()
    return set(runs.loc[runs["server_timing"] == SERVER_TIMING_UNAVAILABLE, "run_id"].astype(str))


def sample_rows(req: pd.DataFrame, client_only_runs: Collection[str] = ()) -> pd.DataFrame:
    """The rows of `req` that are samples of their point: matched profiling rows, and for the
    runs in `client_only_runs` (no server timing) their client-only profiling rows without an
    error."""
    if req.empty:
        return req.copy()
    prof = (req["phase"] == "profiling") & ~req["is_warmup"].fillna(False).astype(bool)
    keep = req["match_status"] == "matched"
    if client_only_runs:
        no_error = req["client_error"].isna() if "client_error" in req else True
        keep = keep | (
            req["run_id"].astype(str).isin(set(client_only_runs))
            & (req["match_status"] == "client-only")
            & no_error
        )
    return req[prof & keep].copy()


def is_server_metric(column: str) -> bool:
    """A per-request metric (or a summary figure of one) that needs the server's timing records."""
    return any(column == m or column.startswith(m + "_") for m in SERVER_METRICS)
