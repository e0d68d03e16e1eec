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
log lines. Load, startup and warm-up times are recorded separately in startup.json."""
from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

from qualflow.aiperf.command import AiperfPoint, load_points
from qualflow.phases import aiperf_tag
from qualflow.server.timing import read_timing_log

from .lifetime import die_with_parent
from .server_process import ServerError, ServerProcess, free_port


class SessionInterrupted(BaseException):
    """Raised from a signal handler so that `finally` blocks stop the server."""


def _install_signal_handlers() -> None:
    def handler(signum, frame):
        raise SessionInterrupted(f"received {signal.Signals(signum).name}")
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, handler)
    die_with_parent()  # die (cleanly, via the handler) if our parent - Snakemake's job thread - dies


def _wait_timing_flushed(path: Path, expected_ids: set[str], timeout_s: float = 10.0) -> int:
    """Records are appended when a response is final; wait until every sent request id is there."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = {r.request_id for r in read_timing_log(path, strict=False)}
        missing = expected_ids - seen
        if not missing or time.monotonic() > deadline:
            return len(missing)
        time.sleep(0.2)


def run_session(*, bundle: str, out: str | Path, device: str, host: str, port: int, model_name: str,
                points: list[dict], startup_timeout_s: float, warmup_requests: int,
                warmup_max_tokens: int, max_batch: int | None = None, max_context: int | None = None,
                cpu_threads: int | None = None,
                aiperf_workers: int = 1,
                aiperf_record_processors: int = 1, aiperf_timeout_s: float = 3600.0,
                run_protocol: bool = True) -> int:
    from qualflow.aiperf.exports import read_records
    from qualflow.aiperf.runner import run_point

    from .conformance import run_protocol_checks, write_protocol
    from .warmup import run_warmup, write_warmup

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "points").mkdir(exist_ok=True)
    pts = [AiperfPoint.from_dict(p) for p in points]
    from .provenance import collect
    (out / "provenance.json").write_text(json.dumps(collect(with_torch=device != "cpu"), indent=2))
    timing_log = out / "server_timing.jsonl"
    if timing_log.exists():
        timing_log.unlink()
    if port == 0:
        port = free_port(host)
    bundle_dir = Path(bundle)
    srv = ServerProcess(bundle=str(bundle_dir), device=device, host=host, port=port, model_name=model_name,
                        timing_log=timing_log, log_path=out / "server.log", max_batch=max_batch,
                        max_context=max_context, cpu_threads=cpu_threads)
    settings = {"device": device, "max_batch": max_batch, "max_context": max_context, "cpu_threads": cpu_threads,
                "aiperf_workers": aiperf_workers, "aiperf_record_processors": aiperf_record_processors,
                "warmup_requests": warmup_requests, "warmup_max_tokens": warmup_max_tokens,
                "protocol_checks": run_protocol}
    session = {"bundle": str(bundle_dir), "device": device, "url": srv.url, "model_name": model_name,
               "server_command": srv.cmd, "settings": settings, "stages": {}, "points": {}, "error": None,
               "session_started_ns": time.time_ns()}
    stages = session["stages"]
    sent_ids: set[str] = set()
    rc = 1

    def stage(name, t0):
        t1 = time.time_ns()
        stages[name] = {"start_ns": t0, "end_ns": t1, "wall_s": (t1 - t0) / 1e9}

    try:
        _install_signal_handlers()
        t0 = time.time_ns()
        srv.start()
        session["server_pid"] = srv.proc.pid
        print(f"session: server pid {srv.proc.pid} starting at {srv.url}", flush=True)
        health = srv.wait_healthy(startup_timeout_s)
        stage("startup", t0)
        startup = {
            "url": srv.url, "pid": srv.proc.pid, "spawn_ns": srv.spawn_ns, "healthy_ns": srv.healthy_ns,
            "startup_s": (srv.healthy_ns - srv.spawn_ns) / 1e9,
            "load_s": health.get("load_s"),
            "server_startup_s": health.get("startup_s"),
            "health": health,
        }
        print(f"session: healthy after {startup['startup_s']:.1f}s", flush=True)

        t0 = time.time_ns()
        wrows = run_warmup(srv.url, model_name, warmup_requests, warmup_max_tokens)
        stage("warmup", t0)
        write_warmup(wrows, str(out / "warmup.parquet"))
        sent_ids |= {r["request_id"] for r in wrows}
        startup["warmup_s"] = stages["warmup"]["wall_s"]
        startup["warmup_requests"] = len(wrows)
        (out / "startup.json").write_text(json.dumps(startup, indent=2))
        srv.check_alive()
        bad = [r for r in wrows if r["error"]]
        if bad:
            raise ServerError(f"{len(bad)} of {len(wrows)} warm-up requests failed: {bad[0]['error']}")

        t0 = time.time_ns()
        prow = run_protocol_checks(srv.url, model_name) if run_protocol else []
        stage("protocol", t0)
        write_protocol(prow, str(out / "protocol.parquet"))
        sent_ids |= {r["request_id"] for r in prow}
        srv.check_alive()
        print(f"session: protocol {sum(r['passed'] for r in prow)}/{len(prow)} passed", flush=True)

        for p in pts:
            t0 = time.time_ns()
            print(f"session: AIPerf point {p.point_id}", flush=True)
            rec = run_point(p, url=srv.url, model_name=model_name, tokenizer_dir=str(bundle_dir),
                            point_dir=out / "points" / p.point_id, phase_header=aiperf_tag(p.point_id),
                            workers_max=aiperf_workers, record_processors=aiperf_record_processors,
                            timeout_s=aiperf_timeout_s, alive_check=srv.check_alive)
            stage(f"aiperf:{p.point_id}", t0)
            srv.check_alive()
            sent_ids |= {r["request_id"] for r in read_records(out / "points" / p.point_id / "aiperf")
                         if r["request_id"]}
            session["points"][p.point_id] = {"command": rec["command"], "exit_code": rec["exit_code"],
                                             "ok": rec["verdict"]["ok"], "reasons": rec["verdict"]["reasons"]}
            print(f"session: point {p.point_id} ok={rec['verdict']['ok']} {rec['verdict']['reasons']}",
                  flush=True)
        session["timing_records_missing"] = _wait_timing_flushed(timing_log, sent_ids)
        rc = 0
    except (ServerError, SessionInterrupted, TimeoutError) as e:
        session["error"] = f"{type(e).__name__}: {e}"
        print(f"session: error: {session['error']}", file=sys.stderr, flush=True)
    finally:
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):   # a second Ctrl-C must not abort the stop
            signal.signal(s, signal.SIG_IGN)
        t0 = time.time_ns()
        session["server_exit_code"] = srv.stop()
        stage("shutdown", t0)
        session["session_ended_ns"] = time.time_ns()
        timing_log.touch()
        (out / "session.json").write_text(json.dumps(session, indent=2, default=str))
        print(f"session: server stopped (exit code {session['server_exit_code']})", flush=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    return rc


def main_session(a) -> int:
    points = load_points(a.points)
    return run_session(bundle=a.bundle, out=a.out, device=a.device, host=a.host, port=a.port,
                       model_name=a.model_name, points=points, startup_timeout_s=a.startup_timeout,
                       warmup_requests=a.warmup_requests, warmup_max_tokens=a.warmup_max_tokens,
                       max_batch=a.max_batch or None, max_context=a.max_context or None,
                       cpu_threads=a.cpu_threads or None, aiperf_workers=a.aiperf_workers,
                       aiperf_record_processors=a.aiperf_record_processors,
                       aiperf_timeout_s=a.aiperf_timeout, run_protocol=not a.no_protocol)
