"""PointRun: the record of one AIPerf run (`points/<key>/run.json`), written by the runner and
read by the session and the join. Its keys on disk: point, argv, input_file_sha256, command, env,
started_ns, ended_ns, exit_code, verdict, dataset_sha256."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from qualflow.aiperf.command import AiperfPoint
from qualflow.aiperf.exports import Verdict


@dataclass
class PointRun:
    point: AiperfPoint | None = None
    argv: list[str] = field(default_factory=list)  # as run, an API key shown as a placeholder
    input_file_sha256: str | None = None
    command: str | None = None  # `argv` as one shell-quoted line
    env: dict[str, str] = field(default_factory=dict)
    started_ns: int | None = None
    ended_ns: int | None = None
    exit_code: int | None = None
    verdict: Verdict | None = None  # None: the run was never judged (it did not end)
    dataset_sha256: str | None = None

    @property
    def ok(self) -> bool:
        return bool(self.verdict and self.verdict.ok)

    def to_json(self) -> dict:
        return {
            "point": None if self.point is None else self.point.to_dict(),
            "argv": list(self.argv),
            "input_file_sha256": self.input_file_sha256,
            "command": self.command,
            "env": dict(self.env),
            "started_ns": self.started_ns,
            "ended_ns": self.ended_ns,
            "exit_code": self.exit_code,
            "verdict": None if self.verdict is None else self.verdict.to_dict(),
            "dataset_sha256": self.dataset_sha256,
        }

    @classmethod
    def from_json(cls, d: dict) -> PointRun:
        """A run.json as written, or a part of one (every key absent keeps its default)."""
        return cls(
            point=AiperfPoint.from_dict(d["point"]) if d.get("point") else None,
            argv=list(d.get("argv") or []),
            input_file_sha256=d.get("input_file_sha256"),
            command=d.get("command"),
            env=dict(d.get("env") or {}),
            started_ns=d.get("started_ns"),
            ended_ns=d.get("ended_ns"),
            exit_code=d.get("exit_code"),
            verdict=Verdict.from_dict(d["verdict"]) if isinstance(d.get("verdict"), dict) else None,
            dataset_sha256=d.get("dataset_sha256"),
        )

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2))

    @classmethod
    def read(cls, path: str | Path) -> PointRun | None:
        """The run recorded at `path`, or None when the run never wrote one."""
        p = Path(path)
        return cls.from_json(json.loads(p.read_text())) if p.exists() else None
