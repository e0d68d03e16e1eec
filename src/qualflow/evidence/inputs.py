"""What the join reads: `EvidenceInputs` (the `qualflow join` flags, generated from its fields) and
`Sources`, the session's records and the artifacts' files as typed values; and the stage commands
they record, which become `runs.commands`. Light at import (no pandas)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from qualflow.configs import add_arguments, setting
from qualflow.correctness.table import recorded_command
from qualflow.invocation import current_command
from qualflow.session.records import PointRun, SessionRecord, StartupRecord


@dataclass(frozen=True)
class EvidenceInputs:
    session: str = setting(help="session directory (qualflow session --out)")
    correctness: str | None = setting(
        help="the correctness table (qualflow correctness / endpoint-correctness)"
    )
    model: str = setting(help="model name (the run id's first part)")
    profile: str = setting(help="profile name")
    software_key: str = setting(help="software version key the evidence is filed under")
    out: str = setting(help="evidence directory")
    bundle: str | None = setting(None, help="the bundle our server ran (absent for an endpoint)")
    pin: str | None = setting(
        None, help="pin.json (absent for an endpoint that names no checkpoint)"
    )
    device: str | None = setting(None, help="the device recorded in runs (default: the session's)")
    thresholds_version: str | None = setting(
        None, help="the correctness thresholds version the config expects"
    )


def add_join_args(p: argparse.ArgumentParser) -> None:
    add_arguments(p, EvidenceInputs)
    p.add_argument(
        "--points",
        required=True,
        help="points.json: the points the session ran and each point's SLO "
        "(or a JSON list of points)",
    )


def _load_json(p: Path) -> dict:
    return json.loads(p.read_text()) if p.exists() else {}


@dataclass(frozen=True)
class Sources:
    """The join's sources, read once. A session that never wrote a file reads as an empty record."""

    session: SessionRecord
    startup: StartupRecord
    provenance: dict
    manifest: dict  # the bundle's manifest.json ({} for an endpoint)
    pin: dict  # pin.json ({} when no checkpoint is pinned)
    correctness_command: str | None

    @classmethod
    def read(cls, inputs: EvidenceInputs) -> Sources:
        d = Path(inputs.session)
        return cls(
            session=SessionRecord.from_json(_load_json(d / "session.json")),
            startup=StartupRecord.from_json(_load_json(d / "startup.json")),
            provenance=_load_json(d / "provenance.json"),
            manifest=_load_json(Path(inputs.bundle) / "manifest.json") if inputs.bundle else {},
            pin=_load_json(Path(inputs.pin)) if inputs.pin else {},
            correctness_command=recorded_command(inputs.correctness),
        )

    def checkpoint(self) -> dict:
        ck = self.pin.get("checkpoint")
        return ck if isinstance(ck, dict) else {"id": ck}

    def commands(self, run: PointRun | None) -> str:
        """`runs.commands`: the server's and the AIPerf run's argv, and each stage's own command
        line as it recorded it (pin, build, correctness or endpoint_correctness, session), and
        this join's."""
        out: dict = {"server": self.session.server_command, "aiperf": run.command if run else None}
        recorded = (
            ("pin", self.pin.get("command")),
            ("build", self.manifest.get("command")),
            (
                "endpoint_correctness" if self.session.endpoint else "correctness",
                self.correctness_command,
            ),
            ("session", self.session.command),
            ("join", current_command()),
        )
        out.update((stage, cmd) for stage, cmd in recorded if cmd)
        return json.dumps(out, default=str)
