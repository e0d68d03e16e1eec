"""The stages of one serving session, in order (GPU lease, startup, warm-up, protocol checks, the
AIPerf points with their repeats), each recording its wall time."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from qualflow.aiperf.command import AiperfPoint
from qualflow.aiperf.options import AiperfOptions, ClientOptions
from qualflow.gpus import acquire, holders
from qualflow.phases import aiperf_tag, point_key

from .config import SessionConfig
from .records import NOT_REACHED, PointOutcome, PointRun, SessionRecord, StageTime, StartupRecord
from .server_process import ServerError, ServerProcess, http_get_json


def engine_watch(srv: ServerProcess, every_s: float = 2.0):
    """The server process alive and, at most every `every_s`, its /health not reporting a dead
    engine."""
    last = [0.0]

    def check() -> None:
        srv.check_alive()
        if time.monotonic() - last[0] < every_s:
            return
        last[0] = time.monotonic()
        try:
            status, body = http_get_json(srv.url + "/health", timeout=5.0)
        except (OSError, ValueError):
            return  # a slow answer under load is not a verdict; the process check above is
        if status == 503 and body and body.get("status") == "failed":
            raise ServerError(f"the server's engine failed: {body.get('error')}")

    return check


class Session:
    """The stages of one serving session, in order; each records its wall time in the record's
    `stages`. `point_runner`: runs one AIPerf point (qualflow.aiperf.runner.run_point's
    signature); `server_factory`: makes a further server of ours (the harness ceiling's;
    ServerProcess's signature)."""

    def __init__(
        self,
        cfg: SessionConfig,
        *,
        srv: ServerProcess,
        record: SessionRecord,
        client: ClientOptions,
        points: Sequence[AiperfPoint],
        point_runner: Callable[..., PointRun] | None = None,
        server_factory: Callable[..., ServerProcess] | None = None,
    ):
        self.cfg, self.srv, self.record, self.client, self.points = (
            cfg,
            srv,
            record,
            client,
            list(points),
        )
        self.out = Path(cfg.out)
        self.point_runner, self.server_factory = point_runner, server_factory
        self.sent_ids: set[str] = set()
        self.stage_name = "setup"
        self.lease = None
        self.cores_before: set[int] | None = None

    def _stage(self, name: str):
        self.stage_name = name
        return time.time_ns()

    def _done(self, t0: int) -> None:
        self.record.stages[self.stage_name] = StageTime.between(t0, time.time_ns())

    def lease_gpu(self) -> None:
        """On `cuda`/`cuda:N`: a GPU no other job holds, and its share of the cores (inherited by
        the server and AIPerf); the jobs holding the other GPUs now are recorded."""
        device = self.cfg.engine.device
        if not device.startswith("cuda") or os.environ.get("QUALFLOW_GPU_LEASE") == "off":
            return
        t0 = self._stage("gpu-lease")
        self.lease = acquire(
            device,
            timeout_s=self.cfg.startup_timeout,
            holder={"job": "session", "out": str(self.out)},
        )
        self.srv.env.update(self.lease.env())
        if self.lease.cores and hasattr(os, "sched_setaffinity"):
            self.cores_before = os.sched_getaffinity(0)
            os.sched_setaffinity(0, self.lease.cores)
        self.record.gpu = self.lease.record()
        self.note_other_gpu_jobs()
        self._done(t0)

    def note_other_gpu_jobs(self) -> None:
        if self.lease is None:
            return
        if self.record.other_gpu_jobs is NOT_REACHED:
            self.record.other_gpu_jobs = []
        seen = self.record.other_gpu_jobs
        for h in holders(self.lease.lock_path.parent):
            if (h.get("gpu") or {}).get("index") != self.lease.gpu.index and h not in seen:
                seen.append(h)

    def startup(self) -> StartupRecord:
        t0 = self._stage("startup")
        self.srv.start()
        pid = self.srv.proc.pid if self.srv.proc else None
        self.record.server_pid = pid
        print(f"session: server pid {pid} starting at {self.srv.url}", flush=True)
        health = self.srv.wait_healthy(self.cfg.startup_timeout)
        self.health = health
        if health.get("store"):  # the backend our server's store runs on (runs.server_settings)
            self.record.settings["store"] = health["store"]
        self._done(t0)
        startup = StartupRecord(
            url=self.srv.url,
            pid=pid,
            spawn_ns=self.srv.spawn_ns,
            healthy_ns=self.srv.healthy_ns,
            startup_s=(self.srv.healthy_ns - self.srv.spawn_ns) / 1e9,
            load_s=health.get("load_s"),
            server_startup_s=health.get("startup_s"),
            health=health,
        )
        startup.write(self.out / "startup.json")
        print(f"session: healthy after {startup.startup_s:.1f}s", flush=True)
        return startup

    def warmup(self, startup: StartupRecord) -> None:
        from .outputs import write_warmup
        from .warmup import run_warmup

        t0 = self._stage("warmup")
        rows = run_warmup(
            self.srv.url,
            self.client.model_name,
            self.cfg.warmup_requests,
            self.cfg.warmup_max_tokens,
            request_extensions=self.cfg.request_extensions,
            api_key=self.client.api_key,
        )
        self._done(t0)
        write_warmup(rows, str(self.out / "warmup.parquet"))
        self.sent_ids |= {r["request_id"] for r in rows}
        startup.warmup_s, startup.warmup_requests = self.record.stages["warmup"].wall_s, len(rows)
        startup.write(self.out / "startup.json")
        self.srv.check_alive()
        bad = [r for r in rows if r["error"]]
        if bad:
            raise WarmupFailed(
                f"{len(bad)} of {len(rows)} warm-up requests failed: {bad[0]['error']}"
            )

    def protocol(self) -> None:
        from .client_pins import check_openai
        from .conformance import run_protocol_checks
        from .outputs import write_protocol
        from .reasoning_checks import reasoning_checks, reasoning_support
        from .state import session_keys
        from .state_checks import state_checks, state_support
        from .tool_checks import tool_checks, tool_support

        t0 = self._stage("protocol")
        rows = []
        if self.cfg.protocol:
            self.record.client_pin_reasons += check_openai(self.cfg.allow_unpinned_client)
            health, spec = getattr(self, "health", None) or {}, getattr(self.srv, "spec", None)
            keys = session_keys(getattr(self.srv, "env", {}))
            tools = tool_support(health, spec, self.cfg.tools)
            served = set(health.get("capabilities") or ()) | ({"tools"} if tools else set())
            more = [
                m
                for m in (
                    reasoning_checks(reasoning_support(health, spec)),
                    state_checks(state_support(health, spec, self.cfg.state, keys)),
                    tool_checks(tools),
                )
                if m is not None
            ]
            rows = run_protocol_checks(
                self.srv.url,
                self.client.model_name,
                api_key=self.client.api_key,
                request_extensions=self.cfg.request_extensions,
                more=lambda checker: [check for m in more for check in m(checker)],
                served=frozenset(served),
            )
        self._done(t0)
        write_protocol(rows, str(self.out / "protocol.parquet"))
        self.sent_ids |= {r["request_id"] for r in rows}
        self.srv.check_alive()
        print(f"session: protocol {sum(r['passed'] for r in rows)}/{len(rows)} passed", flush=True)

    def aiperf_points(self) -> None:
        """Every point, each `repeats` times, back to back against the same warmed server; repeat
        k of a point is the AIPerf run `point_key(point_id, k)` (its own directory, tag and run
        id)."""
        from qualflow.aiperf.exports import read_records
        from qualflow.aiperf.runner import run_point

        from .client_pins import check_aiperf

        runner = self.point_runner or run_point
        options = AiperfOptions(
            workers_max=self.cfg.aiperf_workers,
            record_processors=self.cfg.aiperf_record_processors,
            timeout_s=self.cfg.aiperf_timeout,
        )
        watch = engine_watch(self.srv)
        runs = [(p, k) for p in self.points for k in range(1, p.repeats + 1)]
        for n, (p, k) in enumerate(runs, 1):
            key, tag = point_key(p.point_id, k), aiperf_tag(p.point_id, k)
            t0 = self._stage(tag)
            pins = self.record.client_pin_reasons
            pins += [r for r in check_aiperf(self.cfg.allow_unpinned_client) if r not in pins]
            label = f"{p.point_id} repeat {k}/{p.repeats}" if p.repeats > 1 else p.point_id
            print(f"session: AIPerf run {n}/{len(runs)}: point {label}", flush=True)
            rec = runner(
                p,
                self.client,
                point_dir=self.out / "points" / key,
                phase_header=tag,
                options=options,
                alive_check=watch,
                progress=TagCounter(self.out / "server_timing.jsonl", tag),
                label=label,
            )
            self._done(t0)
            watch()
            self.sent_ids |= {
                r["request_id"]
                for r in read_records(self.out / "points" / key / "aiperf")
                if r["request_id"]
            }
            self.record.points[key] = outcome = PointOutcome.of(rec)
            print(f"session: point {label} ok={outcome.ok} {outcome.reasons}", flush=True)


class TagCounter:
    """Server timing records carrying one tag so far (the requests of an AIPerf run that are done),
    read incrementally from the timing log."""

    def __init__(self, path: Path, tag: str):
        self.path, self.needle, self.pos, self.n = Path(path), json.dumps(tag), 0, 0

    def __call__(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                chunk = f.read()
        except OSError:
            return self.n
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.pos += len(complete)
        self.n += sum(
            1
            for ln in complete.decode(errors="replace").splitlines()
            if f'"tag": {self.needle}' in ln or f'"tag":{self.needle}' in ln
        )
        return self.n


class WarmupFailed(RuntimeError):
    pass
