"""The harness ceiling of a session: after the stack's points, the points marked `harness_ceiling`
run again, with the same AIPerf settings and the same requests, against a second `qualflow serve` on
the same bundle (its tokenizer, template and limits) whose engine is the synthetic one (no model:
one token per running request every `ceiling_step_ms`). What that measures is our HTTP path,
detokenizer, timing records and AIPerf on this machine with no model behind them: the most the stack
could reach through them. The stack's server is stopped first, so the ceiling runs alone.

Everything goes under `<session>/ceiling/` (server.log, server_timing.jsonl, points/<point id>/ as
a stack point's) and into session.json's `ceiling` (records.CeilingRecord). The ceiling's runs are
never the stack's: a failure here (its server not starting, an AIPerf run failing) is recorded in
`ceiling.error` or the run's outcome, and the session goes on as it would have without it. An
interrupt (SessionInterrupted) still stops the ceiling's server and ends the session."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from qualflow.aiperf.command import AiperfPoint
from qualflow.runtime.config import EngineConfig
from qualflow.server.config import ServerConfig

from .records import CeilingRecord
from .reruns import Rerun, run_rerun
from .server_process import ServerProcess, free_port
from .stages import Session

CEILING_DIR = "ceiling"


def ceiling_points(points) -> list[AiperfPoint]:
    return [p for p in points if p.harness_ceiling]


def in_flight(point: AiperfPoint) -> int:
    """The most requests `point` can have open at once: its concurrency, or for an open-loop point
    without a cap, all the requests of its larger phase (warm-up or profiling)."""
    if point.concurrency is not None:
        return point.concurrency
    return max(point.request_count, point.warmup_request_count)


def ceiling_engine(engine: EngineConfig, step_ms: float, points=()) -> EngineConfig:
    """The stack's engine settings (context, limits) with the synthetic engine on `step_ms`; no
    device work, so on cpu whatever the stack ran on. Its batch holds every request any of
    `points` can have in flight (at least the stack's batch): the synthetic engine has no memory
    to run out of, and a ceiling that queued requests behind the stack's batch would measure that
    batch, not the HTTP path and AIPerf (at c256 on a batch of 64 it could never pass 64 tokens
    per step)."""
    batch = max([engine.max_batch, *(in_flight(p) for p in points)])
    return dataclasses.replace(
        engine,
        engine_kind="synthetic",
        step_ms=step_ms,
        device="cpu",
        max_batch=batch,
        engine_process="auto",
        async_scheduling="auto",
    )


def _server(session: Session, out: Path) -> ServerProcess:
    cfg = session.cfg
    server = ServerConfig(
        bundle=str(Path(cfg.bundle)),
        host=cfg.host,
        port=free_port(cfg.host),
        model_name=cfg.model_name or None,
        timing_log=str(out / "server_timing.jsonl"),
        api_server_count=cfg.ceiling_api_server_count,
    )
    engine = ceiling_engine(cfg.engine, cfg.ceiling_step_ms, ceiling_points(session.points))
    srv = (session.server_factory or ServerProcess)(server, engine, log_path=out / "server.log")
    srv.env.update(
        session.srv.env
    )  # the session's GPU lease, if any (the synthetic engine uses none)
    return srv


def _settings(srv: ServerProcess) -> dict:
    return {
        "engine": "synthetic",
        "step_ms": srv.engine.step_ms,
        "max_batch": srv.engine.max_batch,
        "api_server_count": srv.server.api_server_count,
    }


def run_ceiling(session: Session) -> None:
    """The ceiling stage (nothing when no point asks for it): stop the stack's server, start the
    synthetic one, run the points, stop it; its record goes into `session.record.ceiling`."""
    points = ceiling_points(session.points)
    if not points:
        return
    rec = session.record.ceiling = CeilingRecord(step_ms=session.cfg.ceiling_step_ms)
    rerun = Rerun("ceiling", "harness ceiling", points, _server, _settings)
    run_rerun(session, rerun, rec, session.out / CEILING_DIR)
