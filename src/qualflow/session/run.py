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
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from qualflow.aiperf.options import ClientOptions
from qualflow.aiperf.runner import remove_stale_tmpdirs
from qualflow.configs import as_dict, defaults, hidden
from qualflow.invocation import current_command
from qualflow.lifetime import die_with_parent
from qualflow.runtime.config import EngineConfig
from qualflow.server.config import ServerConfig
from qualflow.server.timing import read_timing_log

from .ceiling import CEILING_DIR, ceiling_points, run_ceiling
from .config import SessionConfig
from .records import (
    NOT_REACHED,
    PointRun,
    SessionError,
    SessionRecord,
    StageTime,
    StartupRecord,
    run_id_of,
)
from .server_process import ServerError, ServerProcess, free_port
from .stages import Session
from .state import N_KEYS, session_keys, with_state


class SessionInterrupted(BaseException):
    """Raised from a signal handler so that `finally` blocks stop the server."""


_RECEIVED: dict[str, str | None] = {
    "signal": None
}  # set by the handler, whatever the exception became


def _install_signal_handlers() -> None:
    _RECEIVED["signal"] = None

    def handler(signum, frame):
        if _RECEIVED["signal"] is not None:  # once only: a terminal Ctrl-C reaches the session both
            return  # from the terminal and passed on by Snakemake
        _RECEIVED["signal"] = signal.Signals(signum).name
        raise SessionInterrupted(f"received {signal.Signals(signum).name}")

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, handler)
    die_with_parent()  # die (cleanly, via the handler) if our parent - Snakemake's job thread - dies


def _restore_signal_handlers() -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _wait_timing_flushed(path: Path, expected_ids: set[str], timeout_s: float = 10.0) -> int:
    """Records are appended when a response is final; wait until every sent request id is there."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = {r.request_id for r in read_timing_log(path, strict=False)}
        missing = expected_ids - seen
        if not missing or time.monotonic() > deadline:
            return len(missing)
        time.sleep(0.2)


def _write_missing_outputs(out: Path) -> None:
    """After a failure: the outputs a stage never wrote, empty, so the rule's outputs exist and the
    join can record the rung reached."""
    from .outputs import write_protocol, write_warmup

    if not (out / "warmup.parquet").exists():
        write_warmup([], str(out / "warmup.parquet"))
    if not (out / "protocol.parquet").exists():
        write_protocol([], str(out / "protocol.parquet"))
    if not (out / "startup.json").exists():
        StartupRecord.never_healthy().write(out / "startup.json")
    (out / "server_timing.jsonl").touch()


def archive(out: Path, archive_dir: Path, run_id: str) -> Path:
    """Keep this session's raw artifacts under archive_dir/<run_id>/, as copies: a hard link would
    share its inode with the session directory's file, which a later run rewrites or appends to."""
    dest = archive_dir / run_id
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(out, dest, copy_function=shutil.copy2)
    return dest


def _finish_outputs(out: Path, record: SessionRecord, archive_dir: str | None) -> None:
    """The cleanup's writes, each on its own: one that fails is recorded, never skips the others."""
    steps = [
        ("missing outputs", lambda: _write_missing_outputs(out)),
        ("session.json", lambda: record.write(out / "session.json")),
    ]
    if archive_dir and record.run_id:
        steps.append(("archive", lambda: archive(out, Path(archive_dir), record.run_id)))
    for name, step in steps:
        try:
            step()
        except Exception as e:  # noqa: BLE001 - reported; the remaining writes still happen
            print(
                f"session: error writing {name}: {type(e).__name__}: {e}",
                file=sys.stderr,
                flush=True,
            )
            if record.cleanup_errors is NOT_REACHED:
                record.cleanup_errors = []
            record.cleanup_errors.append(f"{name}: {type(e).__name__}: {e}")
            if name == "archive":  # session.json is already written: add the error to it
                record.write(out / "session.json")


def _fresh_out(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "points").mkdir(exist_ok=True)
    for stale in (
        "session.json",
        "startup.json",
        "warmup.parquet",
        "protocol.parquet",
        "server_timing.jsonl",
    ):
        (out / stale).unlink(missing_ok=True)
    shutil.rmtree(
        out / CEILING_DIR, ignore_errors=True
    )  # an earlier session's ceiling is not this one's
    return out


def engine_settings(engine: EngineConfig) -> dict:
    """The engine settings a session records: the device; the engine's mode resolved for it
    (engine_process "on"/"off", even at the default "auto", so the evidence says how it was served);
    max_batch, max_context and cpu_threads, null at their defaults (the server's own); and every
    other field set away from its default (test-only knobs aside)."""
    base, test_only = defaults(EngineConfig), hidden(EngineConfig)
    device_type = engine.device.split(":")[0]
    out: dict = {
        "device": engine.device,
        "engine_process": "on" if engine.in_own_process(device_type) else "off",
    }
    for k in ("max_batch", "max_context", "cpu_threads"):
        out[k] = None if getattr(engine, k) == base[k] else getattr(engine, k)
    out.update(
        {
            k: v
            for k, v in as_dict(engine).items()
            if k not in out and k not in test_only and v != base[k]
        }
    )
    if engine.engine_kind == "synthetic":  # the ceiling's clock, also at its default
        out["step_ms"] = engine.step_ms
    return out


def session_settings(cfg: SessionConfig, endpoint_launched: bool | None) -> dict:
    """session.json's `settings` (copied into `runs.server_settings`): our server's engine settings,
    or the endpoint's launch; the client side's; request_extensions only when they are off.
    `endpoint_launched`: None for our server."""
    common = {
        "aiperf_workers": cfg.aiperf_workers,
        "aiperf_record_processors": cfg.aiperf_record_processors,
        "warmup_requests": cfg.warmup_requests,
        "warmup_max_tokens": cfg.warmup_max_tokens,
        "protocol_checks": cfg.protocol,
    }
    if endpoint_launched is None:
        settings = {**engine_settings(cfg.engine), **common}
        if (
            cfg.api_server_count != 1
        ):  # absent: one API process (as every run recorded before the setting)
            settings.update(api_server_count=cfg.api_server_count, engine_process="on")
    else:
        settings = {"stack": "endpoint", "endpoint_launched": endpoint_launched, **common}
    if not cfg.request_extensions:
        settings["request_extensions"] = False
    if cfg.state:  # our server's backend (its /health then says which), or the endpoint's own
        ours = endpoint_launched is None
        settings.update(
            store="sqlite" if ours else "endpoint", **({"api_keys": N_KEYS} if ours else {})
        )
    if cfg.reasoning_budgets is not None:
        settings["reasoning_budgets"] = list(cfg.reasoning_budgets)
    return settings


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
    _finish_outputs(session.out, record, session.cfg.archive_dir)
    _restore_signal_handlers()


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
        if ceiling_points(plan.points):
            raise ValueError(
                "session: harness_ceiling needs our server's bundle (the synthetic engine serves its "
                "tokenizer); an endpoint's points cannot have one"
            )
    remove_stale_tmpdirs()  # a session killed with -9 left its private AIPerf TMPDIR behind
    out = _fresh_out(Path(cfg.out))
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
        _install_signal_handlers()
        _measure(session)
        rc = 0
    except (Exception, SessionInterrupted) as e:  # noqa: BLE001 - every failure is evidence: recorded, not lost
        interrupted = isinstance(e, SessionInterrupted) or _RECEIVED["signal"] is not None
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
