"""`qualflow session`: one serving session per model/profile.

Why one process owns the server rather than a Snakemake
`service()` job: service consumers are started *simultaneously* (warm-up, protocol checks and every
AIPerf point would hit the server at once and measure each other), the whole group must fit into
`--cores` at once (#3035), consumers only wait `--latency-wait` for the service marker (#2816), the
service's exit status is ignored (a crash is not noticed), a failing consumer makes Snakemake
SIGKILL the service shell (orphaning a background server), and on SLURM a service group must run in
one allocation whose members run sequentially (#4223). Here instead:

  start server (own process group, PDEATHSIG) -> wait for /health (timeout) -> warm-up ->
  protocol checks -> AIPerf point 1..N (sequential) -> [the harness ceiling: the points marked
  `harness_ceiling` again, against a synthetic-engine server; session.ceiling] -> stop server
  (finally; also on SIGTERM/SIGINT/SIGHUP, each handled once, and when Snakemake itself dies: this
  process has PDEATHSIG=SIGTERM towards it).

A crash of the server is noticed while any stage runs and fails the session with the server's
last log lines. Any failure is recorded in session.json (`error`: stage, exception type,
message); with `record_failures` the session then still writes every output and exits 0, so the
join records the rung reached and the report shows why (the DAG fails later, at `qualify`). Load,
startup and warm-up times are recorded separately in startup.json. With `archive_dir`, the
session directory is also kept under `archive_dir/<run_id>/` (copies), so a failed rerun never
deletes or changes the last good raw evidence."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from qualflow.aiperf.options import ClientOptions
from qualflow.aiperf.runner import remove_stale_tmpdirs
from qualflow.invocation import current_command
from qualflow.server.config import ServerConfig
from qualflow.server.timing import read_timing_log

from .cache_off import cache_off_points, run_cache_off
from .ceiling import ceiling_points, run_ceiling
from .config import SessionConfig
from .out_dir import finish_outputs, fresh_out
from .records import PointRun, SessionError, SessionRecord, StageTime, run_id_of
from .server_process import ServerError, ServerProcess, free_port
from .settings import session_settings
from .signals import (
    RECEIVED,
    SessionInterrupted,
    install_signal_handlers,
    raise_if_interrupted,
    restore_signal_handlers,
)
from .stages import Session
from .state import session_keys, with_state


def _wait_timing_flushed(path: Path, expected_ids: set[str], timeout_s: float = 10.0) -> int:
    """Records are appended when a response is final; wait until every sent request id is there."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = {r.request_id for r in read_timing_log(path, strict=False)}
        missing = expected_ids - seen
        if not missing or time.monotonic() > deadline:
            return len(missing)
        time.sleep(0.2)


def _our_server(
    cfg: SessionConfig, out: Path, server_factory
) -> tuple[ServerProcess, ClientOptions]:
    """Our server on the bundle, with exactly the session's engine settings (on cuda the session
    leases one GPU and the server sees only that one), and how the clients reach it."""
    bundle = str(Path(cfg.bundle))
    server = ServerConfig(
        bundle=bundle,
        host=cfg.host,
        port=cfg.port or free_port(cfg.host),
        model_name=cfg.model_name or None,
        timing_log=str(out / "server_timing.jsonl"),
        reasoning_budgets=cfg.reasoning_budgets,
        api_server_count=cfg.api_server_count,
    )
    env: dict[str, str] = {}
    if cfg.state:  # a store under the session directory, and the session's API keys
        server, env = with_state(server, out)
    device = cfg.engine.device
    engine = dataclasses.replace(cfg.engine, device="cuda" if device.startswith("cuda") else device)
    srv = (server_factory or ServerProcess)(server, engine, log_path=out / "server.log")
    if env:
        srv.env.update(env)
    key = next(iter(session_keys(env)), None)
    return srv, ClientOptions(url=srv.url, model_name=cfg.model_name, tokenizer=bundle, api_key=key)


def _endpoint(spec, out: Path, checkpoint: str | None) -> tuple[ServerProcess, ClientOptions]:
    """The endpoint's handle (launched or not) and how the clients reach it (AIPerf's raw export, so
    every stream's terminal event is checked without server records)."""
    from .endpoint import EndpointProcess

    srv = EndpointProcess(spec, log_path=out / "server.log", checkpoint_dir=checkpoint)
    return srv, ClientOptions(
        url=srv.url,
        model_name=srv.model,
        tokenizer=spec.tokenizer or checkpoint or srv.model,
        api_key=srv.api_key,
        export_level="raw",
    )


def _new_record(cfg: SessionConfig, srv: ServerProcess, client: ClientOptions) -> SessionRecord:
    ours = cfg.endpoint is None
    started_ns = time.time_ns()
    return SessionRecord(
        bundle=str(Path(cfg.bundle)) if cfg.bundle else None,
        device=cfg.engine.device if ours else None,
        url=srv.url,
        model_name=client.model_name,
        stack="qualflow" if ours else "endpoint",
        server_timing="available" if ours else "unavailable",
        server_command=shlex.split(srv.cmd),
        settings=session_settings(cfg, None if ours else srv.launched),
        session_started_ns=started_ns,
        run_id=run_id_of(*cfg.run_name, started_ns) if cfg.run_name else None,
        command=current_command(),
    )


def _measure(session: Session) -> None:
    """Every stage in order, up to the server's last timing record."""
    ours = session.cfg.endpoint is None
    if ours:  # an external endpoint's GPUs are not ours to lease
        session.lease_gpu()
    startup = session.startup()
    session.warmup(startup)
    session.protocol()
    session.aiperf_points()
    session.stage_name = "timing-flush"
    session.record.timing_records_missing = (
        _wait_timing_flushed(session.out / "server_timing.jsonl", session.sent_ids)
        if ours
        else None
    )
    session.note_other_gpu_jobs()
    run_cache_off(session)
    run_ceiling(session)


def _shut_down(session: Session) -> None:
    """Stop the server, give back the GPU and the cores, write every output (a second Ctrl-C must
    not abort this)."""
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    record, t0 = session.record, time.time_ns()
    record.server_exit_code = session.srv.stop()
    if session.lease is not None:
        session.lease.release()
        if session.cores_before:  # the caller's cores back (the session may run in-process)
            os.sched_setaffinity(0, session.cores_before)
    record.stages["shutdown"] = StageTime.between(t0, time.time_ns())
    record.session_ended_ns = time.time_ns()
    print(f"session: server stopped (exit code {record.server_exit_code})", flush=True)
    finish_outputs(session.out, record, session.cfg.archive_dir)
    restore_signal_handlers()


def _one_line(e: BaseException, record: SessionRecord) -> str:
    """The failure's message as one line (it becomes a status reason); a server error's log tail
    goes to the record's `server_log_tail` instead."""
    message = str(e)
    if isinstance(e, ServerError) and "\n" in message:
        message, _, tail = message.partition("\n")
        record.server_log_tail = tail.splitlines()
        message = re.sub(
            r"; last lines of (\S+):$",
            r" (its last log lines: session.json server_log_tail)",
            message,
        )
    return " ".join(message.split())


def _refuse(cfg: SessionConfig, points) -> None:
    """Points the session cannot run as they read, refused before anything is written: the
    reruns need our server; a chained point needs the session's store and no ceiling (whose server
    has none)."""
    if cfg.endpoint is not None and ceiling_points(points):
        raise ValueError(
            "session: harness_ceiling needs our server's bundle (the synthetic engine serves "
            "its tokenizer); an endpoint's points cannot have one"
        )
    if cfg.endpoint is not None and cache_off_points(points):
        raise ValueError(
            "session: cache_off_rerun restarts our server with --no-prefix-caching; an "
            "endpoint's points cannot have one"
        )
    for p in points:
        if p.chaining is not None and (not cfg.state or p.harness_ceiling):
            raise ValueError(
                f"session: point {p.point_id} chains with {p.chaining}, which needs --state (a "
                "response store) and no harness_ceiling (the ceiling's server has no store)"
            )


def run_session(
    cfg: SessionConfig,
    *,
    server_factory: Callable[..., ServerProcess] | None = None,
    point_runner: Callable[..., PointRun] | None = None,
) -> int:
    """One serving session as `cfg` says. With `cfg.endpoint` it qualifies that endpoint instead of
    starting our server on `cfg.bundle`; there are no server timing records then, and the session
    says so (`server_timing`). `server_factory(server, engine, *, log_path)` makes our server's
    process (ServerProcess); `point_runner` runs one AIPerf point (aiperf.runner.run_point)."""
    from . import conformance, warmup  # noqa: F401 - imported now: an interrupt must not land in a lazy import
    from .provenance import collect

    plan = cfg.plan()
    if cfg.endpoint is None and not cfg.bundle:
        raise ValueError(
            "session: --bundle (our server) or --endpoint (an external endpoint) is required"
        )
    spec, checkpoint = None, None
    if cfg.endpoint is not None:  # refused before anything is written
        from .endpoint import EndpointSpec, pinned_checkpoint

        spec, checkpoint = (
            EndpointSpec.from_json(cfg.endpoint),
            pinned_checkpoint(cfg.pin, cfg.checkpoint),
        )
    _refuse(cfg, plan.points)
    remove_stale_tmpdirs()  # a session killed with -9 left its private AIPerf TMPDIR behind
    out = fresh_out(Path(cfg.out))
    (out / "provenance.json").write_text(
        json.dumps(collect(with_torch=cfg.engine.device != "cpu"), indent=2)
    )
    srv, client = (
        _our_server(cfg, out, server_factory) if spec is None else _endpoint(spec, out, checkpoint)
    )
    session = Session(
        cfg,
        srv=srv,
        record=_new_record(cfg, srv, client),
        client=client,
        points=plan.points,
        point_runner=point_runner,
        server_factory=server_factory,
    )
    rc, interrupted = 1, False
    try:
        install_signal_handlers()
        _measure(session)
        raise_if_interrupted()  # a signal that something on the way swallowed
        rc = 0
    except (Exception, SessionInterrupted) as e:  # noqa: BLE001 - every failure is evidence: recorded, not lost
        interrupted = isinstance(e, SessionInterrupted) or RECEIVED["signal"] is not None
        session.record.error = SessionError(
            session.stage_name, type(e).__name__, _one_line(e, session.record)
        )
        print(
            f"session: error in {session.stage_name}: {type(e).__name__}: {e}",
            file=sys.stderr,
            flush=True,
        )
    finally:
        _shut_down(session)
    if rc and cfg.record_failures and not interrupted:
        print(
            "session: the failure is recorded in session.json; the join records the status reached",
            flush=True,
        )
        return 0
    return rc
