"""The session's records on disk, typed: `SessionRecord` (session.json), `StartupRecord`
(startup.json) and `PointRun` (points/<key>/run.json, defined beside the AIPerf runner that writes
it). The session writes them, the join reads them; each has a JSON round trip that keeps the files'
keys as they are.

A key that the session sets only once it reaches some point (the server's pid once the server was
started, the warm-up figures once the warm-up ran, the GPU once one was leased) is `NOT_REACHED`
(session.not_reached) until then and left out of the file; null on disk means the point was
reached and the value is none."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qualflow.aiperf.record import PointRun

from .not_reached import NOT_REACHED, NotReached, json_kwargs, json_of, reached

__all__ = [
    "NOT_REACHED",
    "CacheOffRecord",
    "CeilingRecord",
    "NotReached",
    "PointOutcome",
    "PointRun",
    "SessionError",
    "SessionRecord",
    "StageTime",
    "StartupRecord",
    "reached",
    "repeat_run_id",
    "run_id_of",
]


def run_id_of(model: str, profile: str, started_ns: int) -> str:
    """The evidence run id of a session: the one definition (the join reads it from
    session.json)."""
    return f"{model}.{profile}.{dt.datetime.fromtimestamp(started_ns / 1e9, dt.UTC):%Y%m%dT%H%M%SZ}"


def repeat_run_id(run_id: str, repeat: int) -> str:
    """The evidence run id of repeat `repeat` of a point: repeat 1 is the session's run id."""
    return run_id if repeat == 1 else f"{run_id}.r{repeat}"


@dataclass
class StageTime:
    start_ns: int | None = None
    end_ns: int | None = None
    wall_s: float | None = None

    @classmethod
    def between(cls, start_ns: int, end_ns: int) -> StageTime:
        return cls(start_ns, end_ns, (end_ns - start_ns) / 1e9)

    @classmethod
    def from_json(cls, d: dict) -> StageTime:
        return cls(**json_kwargs(cls, d, {}))


@dataclass
class PointOutcome:
    """One AIPerf run of the session, as session.json sums it up (the full record is its
    run.json)."""

    command: str | None = None
    exit_code: int | None = None
    ok: bool = False
    reasons: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, run: PointRun) -> PointOutcome:
        return cls(
            run.command, run.exit_code, run.ok, list(run.verdict.reasons) if run.verdict else []
        )

    @classmethod
    def from_json(cls, d: dict) -> PointOutcome:
        return cls(**json_kwargs(cls, d, {}))


@dataclass
class SessionError:
    """The session's failure: the stage it happened in, the exception's type and its message."""

    stage: str | None
    type: str | None
    message: str

    def reason(self) -> str:
        if self.stage is None and self.type is None:
            return f"session failed: {self.message}"
        return f"session failed in {self.stage}: {self.type}: {self.message}"

    @classmethod
    def from_json(cls, d: dict | str) -> SessionError:
        if not isinstance(d, dict):  # a bare message
            return cls(None, None, str(d))
        return cls(d.get("stage"), d.get("type"), str(d.get("message")))


@dataclass
class CeilingRecord:
    """session.json's `ceiling`: the harness ceiling, the points marked `harness_ceiling` run again
    against a second server on the synthetic engine (no model: one token per running request every
    `step_ms`) after the stack's points. Its runs are the ceiling's, never the stack's: a failure
    here is recorded in `error` and changes no status of the stack. `points`: each run's outcome by
    point id (its run.json under ceiling/points/<point id>/)."""

    step_ms: float
    server_command: list[str] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    points: dict[str, PointOutcome] = field(default_factory=dict)
    error: SessionError | None = None
    server_exit_code: int | None = None

    def to_json(self) -> dict:
        return json_of(self, {"points": _SESSION_TO["points"], "error": dataclasses.asdict})

    @classmethod
    def from_json(cls, d: dict) -> CeilingRecord:
        return cls(
            **json_kwargs(
                cls, d, {"points": _SESSION_FROM["points"], "error": SessionError.from_json}
            )
        )


@dataclass
class CacheOffRecord:
    """session.json's `cache_off`: the points marked `cache_off_rerun` run again after the stack's
    against our server with the same settings but its prefix cache off (session.cache_off), for the
    cache's effect. Like the ceiling's, its runs are never the stack's. `points`: each run's
    outcome by point id (its run.json under cache_off/points/<point id>/)."""

    server_command: list[str] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    points: dict[str, PointOutcome] = field(default_factory=dict)
    error: SessionError | None = None
    server_exit_code: int | None = None

    to_json = CeilingRecord.to_json

    @classmethod
    def from_json(cls, d: dict) -> CacheOffRecord:
        return cls(
            **json_kwargs(
                cls, d, {"points": _SESSION_FROM["points"], "error": SessionError.from_json}
            )
        )


_SESSION_FROM = {
    "stages": lambda d: {k: StageTime.from_json(v) for k, v in d.items()},
    "points": lambda d: {k: PointOutcome.from_json(v) for k, v in d.items()},
    "error": SessionError.from_json,
    "ceiling": lambda d: CeilingRecord.from_json(d),
    "cache_off": lambda d: CacheOffRecord.from_json(d),
}
_SESSION_TO = {
    "stages": lambda d: {k: dataclasses.asdict(v) for k, v in d.items()},
    "points": lambda d: {k: dataclasses.asdict(v) for k, v in d.items()},
    "error": dataclasses.asdict,
    "ceiling": lambda c: c.to_json(),
    "cache_off": lambda c: c.to_json(),
}


@dataclass
class SessionRecord:
    """session.json: what was served and how, every stage's wall time, each AIPerf run's outcome and
    the failure, if any. `settings` is recorded as given (its keys depend on the stack) and copied
    into the evidence's `runs.server_settings`."""

    bundle: str | None = None
    device: str | None = None
    url: str | None = None
    model_name: str | None = None
    stack: str = "qualflow"  # qualflow | endpoint
    server_timing: str = "available"  # available | unavailable (an endpoint has no Task records)
    server_command: list[str] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    stages: dict[str, StageTime] = field(default_factory=dict)
    points: dict[str, PointOutcome] = field(default_factory=dict)
    error: SessionError | None = None
    client_pin_reasons: list[str] = field(default_factory=list)
    session_started_ns: int | None = None
    run_id: str | None = None
    command: str | None = None  # the `qualflow session` command line
    gpu: dict | NotReached = NOT_REACHED  # the leased GPU (qualflow.gpus)
    other_gpu_jobs: list[dict] | NotReached = NOT_REACHED
    server_pid: int | None | NotReached = NOT_REACHED
    timing_records_missing: int | None | NotReached = (
        NOT_REACHED  # None: no server records (an endpoint)
    )
    server_exit_code: int | None | NotReached = NOT_REACHED
    session_ended_ns: int | None | NotReached = NOT_REACHED
    cleanup_errors: list[str] | NotReached = NOT_REACHED
    server_log_tail: list[str] | NotReached = NOT_REACHED  # the failed server's last log lines
    ceiling: CeilingRecord | NotReached = (
        NOT_REACHED  # the harness ceiling, where points asked for it
    )
    cache_off: CacheOffRecord | NotReached = NOT_REACHED  # the cache-off rerun, where asked for

    @property
    def endpoint(self) -> bool:
        return self.stack == "endpoint"

    @property
    def protocol_checks(self) -> bool:
        return bool(self.settings.get("protocol_checks", True))

    def failure(self) -> str | None:
        """The recorded failure as one reason, naming the stage, exception type and message."""
        return None if self.error is None else self.error.reason()

    def to_json(self) -> dict:
        return json_of(self, _SESSION_TO)

    @classmethod
    def from_json(cls, d: dict) -> SessionRecord:
        return cls(**json_kwargs(cls, d, _SESSION_FROM))

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2, default=str))

    @classmethod
    def read(cls, path: str | Path) -> SessionRecord:
        return cls.from_json(json.loads(Path(path).read_text()))


@dataclass
class StartupRecord:
    """startup.json: the server's start (spawn to healthy, its own load and startup times, its
    /health answer), then the warm-up's wall time and request count. A server that never became
    healthy leaves only `healthy_ns` (null) and `error`."""

    url: str | NotReached = NOT_REACHED
    pid: int | None | NotReached = NOT_REACHED
    spawn_ns: int | None | NotReached = NOT_REACHED
    healthy_ns: int | None | NotReached = NOT_REACHED
    startup_s: float | NotReached = NOT_REACHED
    load_s: float | None | NotReached = NOT_REACHED
    server_startup_s: float | None | NotReached = NOT_REACHED
    health: dict | NotReached = NOT_REACHED
    warmup_s: float | NotReached = NOT_REACHED
    warmup_requests: int | NotReached = NOT_REACHED
    error: str | NotReached = NOT_REACHED

    FIGURES = ("load_s", "server_startup_s", "startup_s", "warmup_s", "warmup_requests")

    @classmethod
    def never_healthy(cls) -> StartupRecord:
        return cls(healthy_ns=None, error="server never became healthy")

    @property
    def healthy(self) -> bool:
        return bool(self.healthy_ns)

    @property
    def serves_model(self) -> bool:
        """An endpoint's /v1/models named the configured model."""
        return isinstance(self.health, dict) and bool(self.health.get("serves_model"))

    def figures(self) -> dict:
        """The start-up figures the evidence keeps (None where not reached)."""
        return {k: reached(getattr(self, k)) for k in self.FIGURES}

    def to_json(self) -> dict:
        return json_of(self, {})

    @classmethod
    def from_json(cls, d: dict) -> StartupRecord:
        return cls(**json_kwargs(cls, d, {}))

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2))

    @classmethod
    def read(cls, path: str | Path) -> StartupRecord:
        return cls.from_json(json.loads(Path(path).read_text()))
