"""What kind of comparison two evidence sets make, and which rows carry a request's figures.

- *cross-version*: the same model/profile under two software keys (or two runs of one key): points
  pair up by (model, profile, workload point), as before.
- *cross-stack*: two different stacks serving the same workload (our server vs an external endpoint,
  or two endpoints): each side is one model/profile, and points pair up by workload point alone. The
  stacks' server settings differ by design, so they are shown, not refused; the dataset identity and
  workload settings must still be equal.

A point's per-request samples are those of the `summary` table (qualflow.evidence.samples)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from qualflow.evidence.compare.names import no_path

CROSS_STACK, CROSS_VERSION = "cross-stack", "cross-version"


@dataclass(frozen=True)
class Kind:
    kind: str  # CROSS_STACK | CROSS_VERSION
    detail: str  # one sentence for the page

    @property
    def cross_stack(self) -> bool:
        return self.kind == CROSS_STACK


def _stack_of(runs: pd.DataFrame, ref) -> str:
    r = runs[runs["run_id"] == ref.run_id] if len(runs) else runs
    if not len(r):
        return f"{ref.model}/{ref.profile}"
    x = r.iloc[0]
    stack = x.get("stack") if "stack" in r else None
    stack = stack if isinstance(stack, str) and stack else "qualflow"
    served = no_path(x.get("served_model")) if "served_model" in r else None
    return f"{stack} ({ref.model}/{ref.profile}" + (f", model {served}" if served else "") + ")"


def comparison_kind(base_refs, head_refs, runs_b: pd.DataFrame, runs_h: pd.DataFrame) -> Kind:
    mb = {(r.model, r.profile) for r in base_refs}
    mh = {(r.model, r.profile) for r in head_refs}
    if len(mb) == 1 and len(mh) == 1 and mb != mh:
        return Kind(
            CROSS_STACK,
            f"Cross-stack comparison: base {_stack_of(runs_b, base_refs[0])} vs head "
            f"{_stack_of(runs_h, head_refs[0])}, on the same workload (points paired by "
            "workload point; the stacks' server settings differ by design and are shown, "
            "not refused)",
        )
    vb, vh = sorted({r.version for r in base_refs}), sorted({r.version for r in head_refs})
    return Kind(
        CROSS_VERSION,
        f"Cross-version comparison: software {', '.join(vb)} vs {', '.join(vh)} "
        "(points paired by model, profile and workload point)",
    )


def point_key(ref, point_id: str, kind: Kind, base_refs, head_refs) -> tuple[str, str, str]:
    if not kind.cross_stack:
        return (ref.model, ref.profile, point_id)
    b, h = base_refs[0], head_refs[0]
    return (f"{b.model} vs {h.model}", f"{b.profile} vs {h.profile}", point_id)
