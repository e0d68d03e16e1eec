"""The cache-off rerun beside a point's figures: the point's TTFT p50 when the session ran it again
against our server with its prefix cache off (qualflow.session.cache_off), so the summary row
carries the cache's effect (`client_ttft_ms_p50` on, `cache_off_client_ttft_ms_p50` off). The
rerun's runs are read from `<session>/cache_off/points/<point id>/`, judged by their own AIPerf
verdict, and never become rows, statuses or SLO figures (every repeat of a point shares its one
rerun)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qualflow.aiperf import exports
from qualflow.session.records import CacheOffRecord, PointRun

CACHE_OFF_DIR = "cache_off"  # qualflow.session.cache_off.CACHE_OFF_DIR


@dataclass(frozen=True)
class CacheOff:
    """One point's cache-off run: AIPerf's TTFT p50 there (None when the run is not valid), why
    not, and its command."""

    ttft_ms_p50: float | None
    reasons: str | None
    command: str | None


def read_cache_offs(session_dir: str | Path, record: CacheOffRecord | None) -> dict[str, CacheOff]:
    """The cache-off run of each point the session reran, by point id ({} when none was)."""
    if record is None:
        return {}
    root = Path(session_dir) / CACHE_OFF_DIR / "points"
    out = {}
    for pid, outcome in record.points.items():
        run = PointRun.read(root / pid / "run.json")
        block = (exports.read_summary(root / pid / "aiperf") or {}).get("time_to_first_token")
        p50 = block.get("p50") if isinstance(block, dict) else None
        ok = bool(run and run.ok and p50 is not None)
        why = (
            None
            if ok
            else "cache-off run not valid: " + ("; ".join(outcome.reasons) or "no AIPerf TTFT")
        )
        out[pid] = CacheOff(
            float(p50) if ok else None, why, run.command if run else outcome.command
        )
    return out


def cache_off_failure(record: CacheOffRecord | None) -> str:
    """Why a point that asked for a cache-off rerun has none: the stage's failure, or no stage."""
    if record is None:
        return "no cache-off rerun: the session ended before it"
    if record.error is not None:
        e = record.error
        return f"no cache-off rerun: it failed in {e.stage}: {e.type}: {e.message}"
    return "no cache-off rerun recorded for the point"


def cache_off_columns(run: CacheOff | None, failure: str) -> dict:
    """The summary columns of a point that asked for a cache-off rerun (`run` None: none ran, for
    `failure`)."""
    if run is None:
        return {"cache_off_client_ttft_ms_p50": None, "cache_off_reasons": failure}
    return {"cache_off_client_ttft_ms_p50": run.ttft_ms_p50, "cache_off_reasons": run.reasons}
