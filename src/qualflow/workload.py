"""Workload points: the plan a session runs and the join judges. `points.json` holds the points (each
an AiperfPoint: everything that changes the requests AIPerf sends) and the SLO of each point, by
point id. The one reader and writer of that file."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from qualflow.aiperf.command import AiperfPoint


@dataclass(frozen=True)
class PointPlan:
    points: tuple[AiperfPoint, ...]
    slos: dict[str, dict] = field(default_factory=dict)   # point_id -> SLO block (qualflow.evidence.slo)

    def to_json(self) -> dict:
        return {"points": [p.to_dict() for p in self.points], "slos": self.slos}

    @classmethod
    def from_json(cls, data: dict | list, source: str = "points") -> "PointPlan":
        if isinstance(data, list):   # a bare list of points: no SLOs
            data = {"points": data, "slos": {}}
        if not isinstance(data, dict) or not isinstance(data.get("points"), list):
            raise ValueError(f"{source}: expected {{points: [...], slos: {{...}}}} or a list of points")
        unknown = set(data) - {"points", "slos"}
        if unknown:
            raise ValueError(f"{source}: unknown keys {sorted(unknown)}")
        points = tuple(AiperfPoint.from_dict(p) for p in data["points"])
        slos = data.get("slos") or {}
        stray = set(slos) - {p.point_id for p in points}
        if stray:
            raise ValueError(f"{source}: slos name no point: {sorted(stray)}")
        return cls(points, slos)

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n")

    @classmethod
    def read(cls, path: str | Path) -> "PointPlan":
        try:
            data = json.loads(Path(path).read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not JSON ({e})") from None
        return cls.from_json(data, source=str(path))
