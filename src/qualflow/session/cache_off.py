"""The cache-off rerun of a session: after the stack's points (and before the harness ceiling), the
points marked `cache_off_rerun` run again, with the same AIPerf settings and the same requests,
against a second `qualflow serve` with exactly the stack's settings but `--no-prefix-caching`, so
that every report carries the prefix cache's effect (evidence.cache_off). The stack's server is
stopped first; the rerun's server takes the session's GPU lease and API keys, and, where the session
serves with stored state, a store of its own (a chained session's turns need one).

Everything goes under `<session>/cache_off/` (server.log, server_timing.jsonl, store.db,
points/<point id>/) and into session.json's `cache_off` (records.CacheOffRecord); its runs never
count toward the point's own accounting or SLOs (session.reruns)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from qualflow.aiperf.command import AiperfPoint

from .records import CacheOffRecord
from .reruns import Rerun, run_rerun
from .server_process import ServerProcess, free_port
from .stages import Session
from .state import STORE_FILE

CACHE_OFF_DIR = "cache_off"


def cache_off_points(points) -> list[AiperfPoint]:
    return [p for p in points if p.cache_off_rerun]


def _server(session: Session, out: Path) -> ServerProcess:
    """The stack's server settings with a port, timing log and store of the rerun's own, and the
    stack's engine with its prefix cache off; the stack's environment (GPU lease, API keys)."""
    stack = session.srv.server
    store = stack.store
    if store.url is not None:  # a fresh store: the stack's responses are not the rerun's
        store = dataclasses.replace(store, url=str(out / STORE_FILE))
    server = dataclasses.replace(
        stack,
        port=free_port(stack.host),
        timing_log=str(out / "server_timing.jsonl"),
        store=store,
    )
    engine = dataclasses.replace(session.srv.engine, prefix_caching=False)
    srv = (session.server_factory or ServerProcess)(server, engine, log_path=out / "server.log")
    srv.env.update(session.srv.env)
    return srv


def _settings(srv: ServerProcess) -> dict:
    return {"prefix_caching": srv.engine.prefix_caching, "store": srv.server.store.url is not None}


def run_cache_off(session: Session) -> None:
    """The cache-off stage (nothing when no point asks for it); its record goes into
    `session.record.cache_off`."""
    points = cache_off_points(session.points)
    if not points:
        return
    rec = session.record.cache_off = CacheOffRecord()
    rerun = Rerun("cache-off", "cache-off rerun", points, _server, _settings)
    run_rerun(session, rerun, rec, session.out / CACHE_OFF_DIR)
