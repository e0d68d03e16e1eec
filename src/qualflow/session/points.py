"""`--points` of the session and the join: a points.json path, or inline JSON for hand use."""

from __future__ import annotations

import json
from pathlib import Path

from qualflow.workload import PointPlan


def read_points(arg: str) -> PointPlan:
    """The plan in `arg`: a points.json path (PointPlan.read, which also takes a bare list of points
    in the file), or inline JSON (a list of points, or the points.json object)."""
    if arg.lstrip().startswith(("[", "{")):
        return PointPlan.from_json(json.loads(arg), source="--points")
    if not Path(arg).is_file():
        raise FileNotFoundError(f"--points: no such file: {arg}")
    return PointPlan.read(arg)
