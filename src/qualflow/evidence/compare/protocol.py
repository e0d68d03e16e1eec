"""The protocol-check matrix: check by check, which side passed, and whether the sides differ.

One builder for both readers: the run report puts every stack of an evidence set side by side (one
column per stack, its runs' checks together), a comparison puts base and head of each compared
model/profile side by side (with the first line of what each saw). `qualflow.report.protocol_matrix`
renders it."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

NOT_RUN, PASS, FAIL = "not run", "pass", "FAIL"
SAW_CHARS = 160  # what a side saw: the first line of the check's detail, this long at most


@dataclass(frozen=True)
class ProtocolMatrix:
    """`table`: optional key columns (`pair`), `check`, one outcome column per side (pass | FAIL |
    not run), optionally `<side> saw` per side, and `differs`."""

    table: pd.DataFrame
    sides: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return self.table.empty

    def differing(self) -> pd.DataFrame:
        return self.table[self.table["differs"]] if not self.empty else self.table

    def differences(self) -> list[str]:
        """One line per differing check: `<check>: <side> <outcome>, <side> <outcome>`."""
        return [
            f"{r['check']}: " + ", ".join(f"{s} {r[s]}" for s in self.sides)
            for r in self.differing().to_dict("records")
        ]


def _outcome(passed) -> str:
    return NOT_RUN if passed is None or passed != passed else (PASS if passed else FAIL)


def _saw(detail) -> str:
    return "" if detail is None or detail != detail else str(detail).splitlines()[0][:SAW_CHARS]


def side_checks(protocol: pd.DataFrame, run_ids: set[str]) -> pd.DataFrame:
    """A side's checks, one row per check name: `passed` (every run of the side passed it) and
    `detail` (the first run's)."""
    if protocol.empty or "name" not in protocol:
        return pd.DataFrame(columns=["name", "passed", "detail"])
    d = protocol[protocol["run_id"].isin(run_ids)]
    d = d.assign(detail=d["detail"] if "detail" in d else None)
    if d["name"].duplicated().any():
        d = d.groupby("name", sort=False).agg(
            passed=("passed", lambda v: bool(all(v))), detail=("detail", "first")
        )
        d = d.reset_index()
    return d[["name", "passed", "detail"]]


def matrix(sides: list[tuple[str, pd.DataFrame]], *, saw: bool) -> pd.DataFrame:
    """Checks (by name, sorted) against sides ((label, `side_checks`)): each side's outcome, with
    `saw` what each side saw, and `differs` when the outcomes are not all equal."""
    names = sorted(set().union(*(set(c["name"]) for _, c in sides))) if sides else []
    out = pd.DataFrame({"check": pd.Series(names, dtype=object)})
    by_side = {label: c.set_index("name") for label, c in sides}
    for label, c in by_side.items():
        out[label] = [_outcome(c["passed"].get(n)) for n in names]
    if saw:
        for label, c in by_side.items():
            out[f"{label} saw"] = [_saw(c["detail"].get(n)) for n in names]
    out["differs"] = out[list(by_side)].nunique(axis=1) > 1 if by_side else pd.Series(dtype=bool)
    return out


def stack_label(run: dict) -> str:
    """A stack as the run report names it: model/profile (stack; `qualflow` for our server)."""
    stack = run.get("stack") if isinstance(run.get("stack"), str) else "qualflow"
    return f"{run['model']}/{run['profile']} ({stack})"


def protocol_by_stack(protocol: pd.DataFrame, runs: pd.DataFrame) -> ProtocolMatrix:
    """One column per stack that ran checks (in the runs' order), its runs' checks together."""
    if protocol.empty or runs.empty:
        return ProtocolMatrix(pd.DataFrame(columns=["check", "differs"]))
    run_ids: dict[str, set[str]] = {}
    for r in runs.drop_duplicates("run_id").to_dict("records"):
        run_ids.setdefault(stack_label(r), set()).add(r["run_id"])
    sides = [(label, c) for label, ids in run_ids.items() if len(c := side_checks(protocol, ids))]
    return ProtocolMatrix(matrix(sides, saw=False), tuple(label for label, _ in sides))


def protocol_pair(pair: str, base: pd.DataFrame, head: pd.DataFrame) -> pd.DataFrame:
    """The matrix of one compared `pair` (model/profile): base's and head's `side_checks`, with what
    each saw."""
    out = matrix([("base", base), ("head", head)], saw=True)
    out.insert(0, "pair", pair)
    return out


def comparison_matrix(pairs: list[pd.DataFrame]) -> ProtocolMatrix:
    """Every compared pair's matrix, one after another."""
    return ProtocolMatrix(
        pd.concat(pairs, ignore_index=True) if pairs else pd.DataFrame(), ("base", "head")
    )
