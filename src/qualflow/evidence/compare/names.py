"""What the page calls each side: its config names (model/profile, stack) and its pinned identity
(checkpoint and revision, software key, bundle hash), never a machine path. A value that is an
absolute path (an endpoint launched on a local checkpoint serves it under its path) is shown by its
last component."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath, PureWindowsPath

import numpy as np
import pandas as pd

IDENTITY_FIELDS = (
    ("checkpoint", "checkpoint"),
    ("checkpoint_revision", "revision"),
    ("software_key", "software"),
    ("bundle_hash", "bundle"),
    ("served_model", "served as"),
)


@dataclass(frozen=True)
class SideName:
    """`name`: the side as the page names it; `identity`: (label, value) pairs of what it pins."""

    side: str  # base | head
    name: str
    identity: tuple[tuple[str, str], ...]

    def identity_text(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in self.identity)


def no_path(v) -> str | None:
    """`v` as text, an absolute path reduced to its last component."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    s = str(v)
    if PurePosixPath(s).is_absolute() or PureWindowsPath(s).is_absolute() or s.startswith("~"):
        return PurePosixPath(s.replace("\\", "/")).name or s
    return s


def _run_row(runs: pd.DataFrame, run_id: str) -> dict:
    r = runs[runs["run_id"] == run_id] if len(runs) and "run_id" in runs else runs.iloc[0:0]
    return r.iloc[0].to_dict() if len(r) else {}


def side_name(side: str, ref, runs: pd.DataFrame) -> SideName:
    """One side named by its first run: `<model>/<profile> (<stack>)` and its pinned identity."""
    x = _run_row(runs, ref.run_id)
    stack = x.get("stack") if isinstance(x.get("stack"), str) and x.get("stack") else "qualflow"
    ident = []
    for col, label in IDENTITY_FIELDS:
        v = no_path(x.get(col) if col != "software_key" else x.get(col, ref.version))
        if v:
            ident.append((label, v[:16] if col == "bundle_hash" else v))
    return SideName(side, f"{ref.model}/{ref.profile} ({stack})", tuple(ident))


def side_names(
    base_refs, head_refs, runs_b: pd.DataFrame, runs_h: pd.DataFrame
) -> tuple[SideName, SideName]:
    """Both sides' names; where they read alike (one model, two versions) each carries its run
    label."""
    b, h = side_name("base", base_refs[0], runs_b), side_name("head", head_refs[0], runs_h)
    if b.name == h.name:
        b = SideName("base", f"{b.name} {base_refs[0].label}", b.identity)
        h = SideName("head", f"{h.name} {head_refs[0].label}", h.identity)
    return b, h
