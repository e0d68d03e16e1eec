"""The session's table outputs and their one writer each (warm-up rows, protocol check rows). Light
on purpose: the session writes them in its cleanup too, where importing an HTTP client is no option
(an interrupt may have left one half imported)."""

from __future__ import annotations

WARMUP_COLUMNS = [
    "request_id",
    "index",
    "phase",
    "stream",
    "http_status",
    "request_id_echoed",
    "sse_events",
    "client_start_ns",
    "client_end_ns",
    "client_latency_ms",
    "error",
]
PROTOCOL_COLUMNS = ["name", "passed", "detail", "request_id"]


def write_warmup(rows: list[dict], out: str) -> None:
    import pandas as pd

    pd.DataFrame(rows, columns=WARMUP_COLUMNS).to_parquet(out, index=False)


def write_protocol(rows: list[dict], out: str) -> None:
    import pandas as pd

    pd.DataFrame(rows, columns=PROTOCOL_COLUMNS).to_parquet(out, index=False)
