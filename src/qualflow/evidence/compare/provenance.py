"""A compared run's provenance, field by field (nested JSON flattened to dotted names), so that two
runs' software, hardware, checkpoint and settings can be put side by side."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from qualflow.evidence.compare.noise import parse_json, server_settings

PROV_FIELDS = (
    "software_key",
    "qualflow_version",
    "git_sha",
    "git_dirty",
    "python",
    "os",
    "hardware",
    "packages",
    "checkpoint",
    "checkpoint_revision",
    "bundle_hash",
    "device",
    "precision",
    "context_limit",
    "generation_config",
    "endpoint",
    "streaming",
    "server_settings",
)
FLATTENED = ("hardware", "packages", "generation_config")
COLUMNS = ["model", "profile", "field", "base", "head", "differs"]


def _flat(prefix: str, v) -> dict:
    v = parse_json(v)
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            out.update(_flat(f"{prefix}.{k}", x))
        return out
    if isinstance(v, list):
        return {prefix: json.dumps(v, sort_keys=True, default=str)}
    return {prefix: None if v is None else str(v)}


def _field(name: str, run: dict) -> dict:
    if name in FLATTENED:
        return _flat(name, run.get(name))
    if name == "server_settings":
        ss = server_settings(run)
        return (
            {"server_settings": "unknown (not recorded)"}
            if ss is None
            else {"server_settings": "recorded", **_flat(name, ss)}
        )
    if name == "endpoint":
        return {}  # the port differs every session; not a provenance difference
    v = run.get(name)
    return {name: None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)}


def provenance_row(runs: pd.DataFrame, corr: pd.DataFrame, run_id: str) -> dict:
    """{field: value as text} of one run, with the correctness thresholds version(s) it was
    judged by."""
    r = runs[runs["run_id"] == run_id]
    out: dict = {}
    if len(r):
        x = r.iloc[0].to_dict()
        for f in PROV_FIELDS:
            out.update(_field(f, x))
    c = corr[corr["run_id"] == run_id] if not corr.empty else corr
    tv = sorted(set(c["thresholds_version"].dropna().astype(str))) if len(c) else []
    out["thresholds_version"] = ", ".join(tv) or None
    return out


def side_by_side(model: str, profile: str, base: dict, head: dict) -> list[dict]:
    """Provenance rows (`COLUMNS`) of one model/profile: every field of either side, sorted."""
    return [
        {
            "model": model,
            "profile": profile,
            "field": f,
            "base": base.get(f),
            "head": head.get(f),
            "differs": base.get(f) != head.get(f),
        }
        for f in sorted(set(base) | set(head))
    ]
