"""A compared point's per-request samples: the rows that carry a request's figures, as the `summary`
table takes them (qualflow.evidence.samples), and, per metric, their values; per-request output
tokens/s is the server's output token count over the client request latency."""

from __future__ import annotations

import numpy as np
import pandas as pd

from qualflow.evidence.compare.stats import METRICS
from qualflow.evidence.samples import runs_without_server_timing, sample_rows


def matched_profiling(req: pd.DataFrame, client_only: set[str] = frozenset()) -> pd.DataFrame:
    """The samples (`sample_rows`) with each request's output tokens/s; `client_only`: the runs
    without server timing."""
    if req.empty:
        return req
    r = sample_rows(req, set(client_only))
    lat = pd.to_numeric(r["client_request_latency_ms"], errors="coerce")
    # the server's count: the client-tokenized OSL re-tokenizes the text and need not match
    out = (
        pd.to_numeric(r["server_output_tokens"], errors="coerce")
        if "server_output_tokens" in r
        else pd.Series(np.nan, index=r.index)
    )
    r["output_tps_per_request"] = out / (lat / 1000.0)
    return r


def point_samples(req: pd.DataFrame, run_id: str, point_id: str) -> dict[str, np.ndarray]:
    """{metric: values} of one run at one point, NaN dropped."""
    if req.empty:
        return {m: np.empty(0) for m, *_ in METRICS}
    r = req[(req["run_id"] == run_id) & (req["point_id"] == point_id)]
    return {
        m: pd.to_numeric(r[m], errors="coerce").dropna().to_numpy(dtype=float) for m, *_ in METRICS
    }


def samples_of(ev: dict, run_id: str, point_id: str) -> dict[str, np.ndarray]:
    """`point_samples` straight from a run's evidence tables (`store.load`)."""
    return point_samples(
        matched_profiling(ev["requests"], runs_without_server_timing(ev["runs"])), run_id, point_id
    )
