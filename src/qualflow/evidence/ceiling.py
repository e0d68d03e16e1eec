"""The harness ceiling beside a point's figures: what the session's synthetic-engine server gave
at the same point through the same HTTP path and AIPerf (qualflow.session.ceiling), and the
stack's share of it. The ceiling's runs are read from `<session>/ceiling/points/<point id>/`,
judged by their own AIPerf verdict, and never become rows, statuses or SLO figures of their own:
they only add the `ceiling_*` and `share_of_ceiling` columns to the stack's summary rows (every
repeat of a point shares its one ceiling run)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qualflow.aiperf import exports
from qualflow.session.records import CeilingRecord, PointRun


@dataclass(frozen=True)
class Ceiling:
    """One point's ceiling run: its step clock, AIPerf's output tok/s and ITL p50 there (None when
    the run is not valid), and why not."""

    step_ms: float
    output_tps: float | None
    itl_ms_p50: float | None
    reasons: str | None
    command: str | None


def _block(summary: dict | None, tag: str, key: str):
    b = (summary or {}).get(tag)
    return b.get(key) if isinstance(b, dict) else None


def read_ceilings(session_dir: str | Path, record: CeilingRecord | None) -> dict[str, Ceiling]:
    """The ceiling of each point the session ran one for, by point id ({} when none did). A run that
    AIPerf's verdict refuses, or one that never ran because the ceiling's server failed, has no
    figures and says why."""
    if record is None:
        return {}
    root = Path(session_dir) / "ceiling" / "points"
    out = {}
    for pid, outcome in record.points.items():
        run = PointRun.read(root / pid / "run.json")
        summary = exports.read_summary(root / pid / "aiperf")
        tps = _block(summary, "output_token_throughput", "avg")
        ok = bool(run and run.ok and tps)
        why = (
            None
            if ok
            else ("ceiling run not valid: " + ("; ".join(outcome.reasons) or "no AIPerf summary"))
        )
        out[pid] = Ceiling(
            record.step_ms,
            float(tps) if ok else None,
            _block(summary, "inter_token_latency", "p50") if ok else None,
            why,
            run.command if run else outcome.command,
        )
    return out


def ceiling_failure(record: CeilingRecord | None) -> str:
    """Why a point that asked for a ceiling has none: the ceiling stage's failure, or no stage."""
    if record is None:
        return "no harness ceiling run: the session ended before it"
    if record.error is not None:
        e = record.error
        return f"no harness ceiling run: it failed in {e.stage}: {e.type}: {e.message}"
    return "no harness ceiling run recorded for the point"


def ceiling_columns(
    ceiling: Ceiling | None, output_tps: float | None, failure: str | None = None
) -> dict:
    """The summary columns of a point with `ceiling` (None: no ceiling run, or `failure`: the
    ceiling's stage failed before this point's run)."""
    if ceiling is None:
        return {"ceiling_reasons": failure} if failure else {}
    share = (
        (output_tps / ceiling.output_tps) if ceiling.output_tps and output_tps is not None else None
    )
    return {
        "ceiling_step_ms": ceiling.step_ms,
        "ceiling_output_token_throughput_tps": ceiling.output_tps,
        "ceiling_client_itl_ms_p50": ceiling.itl_ms_p50,
        "share_of_ceiling": share,
        "ceiling_reasons": ceiling.reasons,
    }
