"""`qualflow session`: one serving session per model/profile.

Why one process owns the server (reference snakemake-9.md §2.5 pattern A) rather than a Snakemake
`service()` job: service consumers are started *simultaneously* (warm-up, protocol checks and every
AIPerf point would hit the server at once and measure each other), the whole group must fit into
`--cores` at once (#3035), consumers only wait `--latency-wait` for the service marker (#2816), the
service's exit status is ignored (a crash is not noticed), a failing consumer makes Snakemake
SIGKILL the service shell (orphaning a background server), and on SLURM a service group must run in
one allocation whose members run sequentially (#4223). Here instead:

  start server (own process group, PDEATHSIG) -> wait for /health (timeout) -> warm-up ->
  protocol checks -> AIPerf point 1..N (sequential) -> stop server (finally; also on SIGTERM/SIGINT/
  SIGHUP and when Snakemake itself dies: this process has PDEATHSIG=SIGTERM towards it).

A crash of the server is noticed while any stage runs and fails the session with the server's last
log lines. Any failure is recorded in session.json (`error`: stage, exception type, message); with
`record_failures` the session then still writes every output and exits 0, so the join records the
rung reached and the report shows why (the DAG fails later, at `qualify`). Load, startup and warm-up
times are recorded separately in startup.json. With `archive_dir`, the session directory is also
kept under `archive_dir/<run_id>/`, so a failed rerun never deletes the last good raw evidence."""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from qualflow.aiperf.command import AiperfPoint, load_points
from qualflow.lifetime import die_with_parent
from qualflow.server.timing import read_timing_log

from .server_process import ServerProcess, free_port
from .stages import ClientOptions, Session

class SessionInterrupted(BaseException):
    """Raised from a signal handler so that `finally` blocks stop the server."""


_RECEIVED: dict[str, str | None] = {"signal": None}   # set by the handler, whatever the exception became


def _install_signal_handlers() -> None:
    _RECEIVED["signal"] = None

    def handler(signum, frame):
        _RECEIVED["signal"] = signal.Signals(signum).name
        raise SessionInterrupted(f"received {signal.Signals(signum).name}")
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, handler)
    die_with_parent()  # die (cleanly, via the handler) if our parent - Snakemake's job thread - dies


def _restore_signal_handlers() -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def run_id_of(model: str, profile: str, started_ns: int) -> str:
    """The evidence run id of a session: the one definition (the join reads it from session.json)."""
    return f"{model}.{profile}.{dt.datetime.fromtimestamp(started_ns / 1e9, dt.timezone.utc):%Y%m%dT%H%M%SZ}"


def repeat_run_id(run_id: str, repeat: int) -> str:
    """The evidence run id of repeat `repeat` of a point: repeat 1 is the session's run id."""
    return run_id if repeat == 1 else f"{run_id}.r{repeat}"


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
        (out / "startup.json").write_text(json.dumps({"healthy_ns": None, "error": "server never became healthy"}))
    (out / "server_timing.jsonl").touch()


def archive(out: Path, archive_dir: Path, run_id: str) -> Path:
    """Keep this session's raw artifacts under archive_dir/<run_id>/ (hard links where possible)."""
    dest = archive_dir / run_id
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)

    def link_or_copy(src, dst):
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
    shutil.copytree(out, dest, copy_function=link_or_copy)
    return dest


def _finish_outputs(out: Path, record: dict, archive_dir) -> None:
    """The cleanup's writes, each on its own: one that fails is recorded, never skips the others."""
    steps = [("missing outputs", lambda: _write_missing_outputs(out)),
             ("session.json", lambda: (out / "session.json").write_text(json.dumps(record, indent=2, default=str)))]
    if archive_dir and record.get("run_id"):
        steps.append(("archive", lambda: archive(out, Path(archive_dir), record["run_id"])))
    for name, step in steps:
        try:
            step()
        except Exception as e:  # noqa: BLE001 - reported; the remaining writes still happen
            print(f"session: error writing {name}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            record.setdefault("cleanup_errors", []).append(f"{name}: {type(e).__name__}: {e}")
            if name == "archive":   # session.json is already written: add the error to it
                (out / "session.json").write_text(json.dumps(record, indent=2, default=str))


def run_session(*, bundle: str | None, out: str | Path, device: str, host: str, port: int, model_name: str,
                points: list[dict], startup_timeout_s: float, warmup_requests: int,
                warmup_max_tokens: int, max_batch: int | None = None, max_context: int | None = None,
                cpu_threads: int | None = None, aiperf_workers: int = 1,
                aiperf_record_processors: int = 1, aiperf_timeout_s: float = 3600.0,
                run_protocol: bool = True, record_failures: bool = False, allow_unpinned_client: bool = False,
                run_name: tuple[str, str] | None = None, archive_dir: str | Path | None = None,
                endpoint=None, checkpoint: str | None = None, request_extensions: bool = True) -> int:
    """`endpoint` (an EndpointSpec): qualify that endpoint instead of starting our server on `bundle`;
    there are no server timing records then, and the session says so (`server_timing`)."""
    from . import conformance, warmup  # noqa: F401 - imported now: an interrupt must not land in a lazy import
    from .provenance import collect

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "points").mkdir(exist_ok=True)
    for stale in ("session.json", "startup.json", "warmup.parquet", "protocol.parquet", "server_timing.jsonl"):
        (out / stale).unlink(missing_ok=True)
    pts = [AiperfPoint.from_dict(p) for p in points]
    (out / "provenance.json").write_text(json.dumps(collect(with_torch=device != "cpu"), indent=2))
    timing_log = out / "server_timing.jsonl"
    if port == 0:
        port = free_port(host)
    bundle_dir = Path(bundle) if bundle else None
    common = {"aiperf_workers": aiperf_workers, "aiperf_record_processors": aiperf_record_processors,
              "warmup_requests": warmup_requests, "warmup_max_tokens": warmup_max_tokens,
              "protocol_checks": run_protocol}
    if endpoint is None:
        # on cuda the session leases one GPU and the server sees only that one
        from qualflow.server.config import EngineConfig, ServerConfig
        unset_is_default = {"max_batch": max_batch, "max_context": max_context, "cpu_threads": cpu_threads}
        srv = ServerProcess(ServerConfig(bundle=str(bundle_dir), host=host, port=port, model_name=model_name or None,
                                         timing_log=str(timing_log)),
                            EngineConfig(device="cuda" if device.startswith("cuda") else device,
                                         **{k: v for k, v in unset_is_default.items() if v}),
                            log_path=out / "server.log")
        settings = {"device": device, "max_batch": max_batch, "max_context": max_context, "cpu_threads": cpu_threads,
                    **common}
        client = ClientOptions(tokenizer=str(bundle_dir), request_extensions=request_extensions)
    else:
        from .endpoint import EndpointProcess
        srv = EndpointProcess(endpoint, log_path=out / "server.log", checkpoint_dir=checkpoint)
        model_name = srv.model
        settings = {"stack": "endpoint", "endpoint_launched": srv.launched, **common}
        client = ClientOptions(tokenizer=endpoint.tokenizer or checkpoint or model_name, api_key=srv.api_key,
                               request_extensions=request_extensions, export_level="raw")
    if not request_extensions:
        settings["request_extensions"] = False
    started_ns = time.time_ns()
    record = {"bundle": str(bundle_dir) if bundle_dir else None, "device": device if endpoint is None else None,
              "url": srv.url, "model_name": model_name, "stack": "qualflow" if endpoint is None else "endpoint",
              "server_timing": "available" if endpoint is None else "unavailable",
              "server_command": srv.argv, "settings": settings, "stages": {}, "points": {}, "error": None,
              "client_pin_reasons": [], "session_started_ns": started_ns,
              "run_id": run_id_of(*run_name, started_ns) if run_name else None}
    session = Session(out=out, bundle=bundle_dir, model_name=model_name, srv=srv, points=pts, record=record,
                      allow_unpinned_client=allow_unpinned_client, client=client)
    rc, interrupted = 1, False
    try:
        _install_signal_handlers()
        if endpoint is None:   # an external endpoint's GPUs are not ours to lease
            session.lease_gpu(device, startup_timeout_s)
        startup = session.startup(startup_timeout_s)
        session.warmup(startup, warmup_requests, warmup_max_tokens)
        session.protocol(run_protocol)
        session.aiperf_points(aiperf_workers, aiperf_record_processors, aiperf_timeout_s)
        session.stage_name = "timing-flush"
        record["timing_records_missing"] = (_wait_timing_flushed(timing_log, session.sent_ids)
                                            if endpoint is None else None)
        session.note_other_gpu_jobs()
        rc = 0
    except (Exception, SessionInterrupted) as e:  # noqa: BLE001 - every failure is evidence: recorded, not lost
        interrupted = isinstance(e, SessionInterrupted) or _RECEIVED["signal"] is not None
        record["error"] = {"stage": session.stage_name, "type": type(e).__name__, "message": str(e)}
        print(f"session: error in {session.stage_name}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
    finally:
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):   # a second Ctrl-C must not abort the stop
            signal.signal(s, signal.SIG_IGN)
        t0 = time.time_ns()
        record["server_exit_code"] = srv.stop()
        if session.lease is not None:
            session.lease.release()
            if session.cores_before:   # the caller's cores back (the session may run in-process)
                os.sched_setaffinity(0, session.cores_before)
        record["stages"]["shutdown"] = {"start_ns": t0, "end_ns": time.time_ns(),
                                        "wall_s": (time.time_ns() - t0) / 1e9}
        record["session_ended_ns"] = time.time_ns()
        print(f"session: server stopped (exit code {record['server_exit_code']})", flush=True)
        _finish_outputs(out, record, archive_dir)
        _restore_signal_handlers()
    if rc and record_failures and not interrupted:
        print("session: the failure is recorded in session.json; the join records the status reached", flush=True)
        return 0
    return rc


def main_session(a) -> int:
    points = load_points(a.points)
    endpoint = None
    if a.endpoint:
        from .endpoint import EndpointSpec
        endpoint = EndpointSpec.from_json(a.endpoint)
    elif not a.bundle:
        raise ValueError("session: --bundle (our server) or --endpoint (an external endpoint) is required")
    checkpoint = None
    if endpoint is not None:
        from .endpoint import pinned_checkpoint
        checkpoint = pinned_checkpoint(a.pin, a.checkpoint)
    return run_session(bundle=a.bundle, endpoint=endpoint, checkpoint=checkpoint,
                       request_extensions=not a.no_request_extensions, out=a.out, device=a.device, host=a.host, port=a.port,
                       model_name=a.model_name, points=points, startup_timeout_s=a.startup_timeout,
                       warmup_requests=a.warmup_requests, warmup_max_tokens=a.warmup_max_tokens,
                       max_batch=a.max_batch or None, max_context=a.max_context or None,
                       cpu_threads=a.cpu_threads or None, aiperf_workers=a.aiperf_workers,
                       aiperf_record_processors=a.aiperf_record_processors,
                       aiperf_timeout_s=a.aiperf_timeout, run_protocol=not a.no_protocol,
                       record_failures=a.record_failures, allow_unpinned_client=a.allow_unpinned_client,
                       run_name=tuple(a.run_name) if a.run_name else None, archive_dir=a.archive_dir)
