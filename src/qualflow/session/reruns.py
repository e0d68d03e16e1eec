"""The session's reruns: after the stack's points, some points run again against a second server of
ours, started once the stack's server is stopped (so each runs alone, on the session's GPU lease):
the harness ceiling (session.ceiling: the synthetic engine) and the cache-off rerun
(session.cache_off: the same engine with its prefix cache off).

A rerun keeps everything under its own directory of the session (server.log, server_timing.jsonl,
points/<point id>/ as a stack point's) and its record in session.json (records.CeilingRecord,
records.CacheOffRecord). Its runs are never the stack's: the join reads no request row, status or
SLO figure from them. A failure here (its server not starting, an AIPerf run failing) is recorded in
the record's `error` or the run's outcome, and the session goes on as it would have without it. An
interrupt (SessionInterrupted) still stops the rerun's server and ends the session."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from qualflow.aiperf.command import AiperfPoint
from qualflow.aiperf.options import AiperfOptions
from qualflow.phases import aiperf_tag

from .records import PointOutcome, SessionError, StageTime
from .server_process import ServerProcess
from .signals import raise_if_interrupted
from .stages import Session, TagCounter, engine_watch


@dataclass(frozen=True)
class Rerun:
    """One kind of rerun: `name` prefixes its stages (`<name>-startup`, `<name>:<point id>`),
    `label` says it in the log; `server(session, out)` makes its server (not started) and
    `settings(srv)` what its record keeps of it."""

    name: str
    label: str
    points: list[AiperfPoint]
    server: Callable[[Session, Path], ServerProcess]
    settings: Callable[[ServerProcess], dict]


def _run_points(session: Session, rerun: Rerun, srv: ServerProcess, rec, out: Path) -> None:
    from qualflow.aiperf.runner import run_point

    runner = session.point_runner or run_point
    client = dataclasses.replace(session.client, url=srv.url)  # the session's API key stays
    cfg = session.cfg
    options = AiperfOptions(
        workers_max=cfg.aiperf_workers,
        record_processors=cfg.aiperf_record_processors,
        timeout_s=cfg.aiperf_timeout,
    )
    watch = engine_watch(srv)
    for p in rerun.points:
        tag, label = aiperf_tag(p.point_id), f"{p.point_id} ({rerun.label})"
        t0 = time.time_ns()
        session.stage_name = f"{rerun.name}:{p.point_id}"
        print(f"session: AIPerf run, {rerun.label}: point {p.point_id}", flush=True)
        run = runner(
            p,
            client,
            point_dir=out / "points" / p.point_id,
            phase_header=tag,
            options=options,
            alive_check=watch,
            progress=TagCounter(out / "server_timing.jsonl", tag),
            label=label,
        )
        session.record.stages[session.stage_name] = StageTime.between(t0, time.time_ns())
        rec.points[p.point_id] = outcome = PointOutcome.of(run)
        print(
            f"session: {rerun.label} point {p.point_id} ok={outcome.ok} {outcome.reasons}",
            flush=True,
        )


def run_rerun(session: Session, rerun: Rerun, rec, out: Path) -> None:
    """Stop the stack's server, start the rerun's, run its points, stop it; `rec` (the rerun's
    record, already in session.record) gets the server's command and settings, each run's outcome
    and the failure, if any."""
    out.mkdir(parents=True, exist_ok=True)
    session.record.server_exit_code = session.srv.stop()  # the stack is done: the rerun runs alone
    srv, session.stage_name, t0 = None, f"{rerun.name}-startup", time.time_ns()
    try:
        srv = rerun.server(session, out)
        rec.server_command, rec.settings = srv.argv, rerun.settings(srv)
        srv.start()
        srv.wait_healthy(session.cfg.startup_timeout)
        session.record.stages[session.stage_name] = StageTime.between(t0, time.time_ns())
        _run_points(session, rerun, srv, rec, out)
    except Exception as e:  # noqa: BLE001 - the rerun's failure is its own, never the stack's
        raise_if_interrupted()  # a signal wrapped on its way (session.signals) stops the session
        rec.error = SessionError(
            session.stage_name, type(e).__name__, " ".join(str(e).split())[:2000]
        )
        print(
            f"session: {rerun.label} failed in {session.stage_name}: {type(e).__name__}: {e}",
            file=sys.stderr,
            flush=True,
        )
    finally:
        if srv is not None:
            rec.server_exit_code = srv.stop()
