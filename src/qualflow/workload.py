"""Workload points: the plan a session runs and the join judges.

A workload (config `workloads.<name>`) becomes one point per load it lists: one per concurrency
(closed loop) and one per request rate (open loop). A point's id is `<workload>_<load label>`, the
label `c<concurrency>` or `r<rate>` with the rate's dot written `p` (0.5 -> `r0p5`): point ids name
directories and phase tags, where a dot would read as a repeat mark (qualflow.phases). The SLO of a
point is the workload's `slo` with the `slo_by_load` entry of its load label merged over it; its
request count is the workload's `request_count`, or its load's entry of `request_count_by_load`.

`points.json` holds the points (each an AiperfPoint: everything that changes the requests AIPerf
sends) and the SLO of each point, by point id; PointPlan is its one reader and writer. A session
gets a plan without SLOs, built from `request_settings` alone, so that an SLO change reruns the join
but not the serving session."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from qualflow.aiperf.command import AiperfPoint

LOAD_KINDS = ("concurrency", "request_rate")
SLO_KEYS = ("slo", "slo_by_load")
BY_LOAD = ("slo_by_load", "request_count_by_load")  # keyed by the label of a load
# workload keys that are no point setting: the loads become points, the SLOs the plan's slos
_NOT_POINT_KEYS = LOAD_KINDS + ("rate_max_concurrency", "request_count_by_load") + SLO_KEYS


@dataclass(frozen=True)
class PointPlan:
    points: tuple[AiperfPoint, ...]
    slos: dict[str, dict] = field(
        default_factory=dict
    )  # point_id -> SLO block (qualflow.evidence.slo)

    def to_json(self) -> dict:
        return {"points": [p.to_dict() for p in self.points], "slos": self.slos}

    @classmethod
    def from_json(cls, data: dict | list, source: str = "points") -> PointPlan:
        if isinstance(data, list):  # a bare list of points: no SLOs
            data = {"points": data, "slos": {}}
        if not isinstance(data, dict) or not isinstance(data.get("points"), list):
            raise ValueError(
                f"{source}: expected {{points: [...], slos: {{...}}}} or a list of points"
            )
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
    def read(cls, path: str | Path) -> PointPlan:
        try:
            data = json.loads(Path(path).read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not JSON ({e})") from None
        return cls.from_json(data, source=str(path))


def load_label(kind: str, value: float) -> str:
    """`c<concurrency>` or `r<rate>` (no dot: 0.5 -> `r0p5`): the suffix of a point id and the key
    of `slo_by_load`."""
    if kind not in LOAD_KINDS:
        raise ValueError(f"load kind {kind!r}: one of {LOAD_KINDS}")
    return f"c{value}" if kind == "concurrency" else f"r{value:g}".replace(".", "p")


def loads(workload: dict) -> list[tuple[str, float]]:
    """(kind, value) of every load of a workload: its concurrencies, then its request rates."""
    return [(kind, v) for kind in LOAD_KINDS for v in workload.get(kind) or []]


def point_id(name: str, kind: str, value: float) -> str:
    return f"{name}_{load_label(kind, value)}"


def check_workload(name: str, workload: dict) -> None:
    """The invariants a workload keeps beyond the config schema: at least one load, and every key
    of `slo_by_load` and `request_count_by_load` the label of one of its loads."""
    if not loads(workload):
        raise ValueError(
            f"workloads.{name}: concurrency or request_rate must list at least one load"
        )
    _check_chaining(name, workload)
    labels = {load_label(k, v) for k, v in loads(workload)}
    for key in BY_LOAD:
        for lab in workload.get(key) or {}:
            if lab not in labels:
                raise ValueError(
                    f"workloads.{name}.{key}.{lab} names no load of the workload "
                    f"(loads: {sorted(labels)})"
                )


def _check_chaining(name: str, workload: dict) -> None:
    """A chained workload's turns live in the server's response store: the harness ceiling's server
    has none (whether the model serves with one is the config's check, `models.<m>.state`)."""
    if workload.get("chaining") is not None and workload.get("harness_ceiling"):
        raise ValueError(
            f"workloads.{name}.harness_ceiling: the ceiling's server (the synthetic engine) has no "
            f"response store, so it cannot serve the chained turns of chaining: "
            f"{workload['chaining']}; set one of the two on another workload"
        )


def point_slo(workload: dict, label: str) -> dict:
    """The SLO of the workload's point at load `label`: `slo`, with `slo_by_load[label]` merged over
    it (key by key: a per-load entry replaces the workload's entry of that name)."""
    slo = dict(workload.get("slo") or {})
    slo.update((workload.get("slo_by_load") or {}).get(label) or {})
    return slo


def goodput_bounds(workload: dict) -> dict:
    """The per-request bounds of the workload's goodput SLO, which AIPerf --goodput is given (its
    `min_fraction` is judged by the join only)."""
    goodput = (workload.get("slo") or {}).get("goodput") or {}
    return {k: v for k, v in goodput.items() if k != "min_fraction"}


def request_settings(workload: dict) -> dict:
    """The part of a workload that shapes its requests: everything but the SLOs, except the goodput
    bounds (part of the AIPerf command). Its points equal those of the whole workload."""
    out = {k: v for k, v in workload.items() if k not in SLO_KEYS}
    bounds = goodput_bounds(workload)
    if bounds:
        out["slo"] = {"goodput": bounds}
    return out


def workload_points(
    name: str, workload: dict, *, request_extensions: bool = True
) -> list[AiperfPoint]:
    """The points of one workload, in the order of `loads`."""
    check_workload(name, workload)
    base = {k: v for k, v in workload.items() if k not in _NOT_POINT_KEYS}
    counts = workload.get("request_count_by_load") or {}
    out = []
    for kind, v in loads(workload):
        p = {
            "point_id": point_id(name, kind, v),
            "workload": name,
            "isl": None,
            **base,
            "goodput": goodput_bounds(workload),
            "concurrency": v if kind == "concurrency" else workload.get("rate_max_concurrency"),
        }
        if (label := load_label(kind, v)) in counts:
            p["request_count"] = counts[label]
        if kind == "request_rate":
            p["request_rate"] = v
        if not request_extensions:
            p["request_extensions"] = False
        out.append(AiperfPoint.from_dict(p))
    return out


def plan_points(workloads: dict[str, dict], *, request_extensions: bool = True) -> PointPlan:
    """The plan of a model's workloads (name -> config, in the order the model lists them): every
    point and its SLO."""
    points, slos = [], {}
    for name, wc in workloads.items():
        points += workload_points(name, wc, request_extensions=request_extensions)
        slos.update({point_id(name, k, v): point_slo(wc, load_label(k, v)) for k, v in loads(wc)})
    return PointPlan(tuple(points), slos)


def add_points_args(p) -> None:
    """Flags of `qualflow points`."""
    p.add_argument(
        "--workloads",
        required=True,
        help="JSON {name: workload config (config `workloads.<name>`)}, in the order the model "
        "lists them, or a file holding it",
    )
    p.add_argument(
        "--no-request-extensions",
        action="store_true",
        help="points send standard Responses fields only (no ignore_eos / min_tokens)",
    )
    p.add_argument(
        "--no-slos", action="store_true", help="write the points only (what a session runs)"
    )
    p.add_argument("--out", required=True, help="the points.json to write")


def main_points(a) -> int:
    text = a.workloads if a.workloads.lstrip().startswith("{") else Path(a.workloads).read_text()
    try:
        workloads = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"--workloads: not JSON ({e})") from None
    if not isinstance(workloads, dict) or not all(isinstance(w, dict) for w in workloads.values()):
        raise ValueError("--workloads: expected a JSON object {name: workload config}")
    plan = plan_points(workloads, request_extensions=not a.no_request_extensions)
    if a.no_slos:
        plan = PointPlan(plan.points)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    plan.write(a.out)
    print(f"points: {len(plan.points)} ({', '.join(p.point_id for p in plan.points)}) -> {a.out}")
    return 0
