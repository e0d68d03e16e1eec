"""The `runs` columns every run of a session shares: provenance, the artifacts, the server."""

from __future__ import annotations

import datetime as dt
import json

from qualflow.evidence.inputs import Sources
from qualflow.session.records import reached


def _iso(ns):
    return None if ns is None else dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).isoformat()


def session_columns(src: Sources, device: str | None) -> dict:
    """The `runs` columns every run of the session shares: provenance, the artifacts, the server."""
    prov, manifest, session, ckpt = (
        src.provenance,
        src.manifest,
        src.session,
        src.checkpoint(),
    )
    return {
        "qualflow_version": prov.get("qualflow_version"),
        "git_sha": prov.get("git_sha"),
        "git_dirty": prov.get("git_dirty"),
        "packages": json.dumps(prov.get("packages"), sort_keys=True),
        "python": prov.get("python"),
        "os": prov.get("os"),
        "hardware": json.dumps(prov.get("hardware"), sort_keys=True),
        "checkpoint": ckpt.get("id"),
        "checkpoint_revision": ckpt.get("revision")
        or f"content-sha256:{ckpt.get('content_sha256')}",
        "pin": json.dumps(src.pin, sort_keys=True, default=str)[:100000],
        "bundle_hash": manifest.get("bundle_hash"),
        "bundle_manifest": json.dumps(
            {k: v for k, v in manifest.items() if k != "files"}, sort_keys=True, default=str
        )[:100000],
        "stack": session.stack or "qualflow",
        "server_timing": session.server_timing or "available",
        "served_model": session.model_name,
        "device": None if session.endpoint else (device or session.device),
        "precision": manifest.get("precision") or manifest.get("dtype") or manifest.get("profile"),
        "context_limit": manifest.get("context_limit"),
        "generation_config": json.dumps(
            manifest.get("generation_config"), sort_keys=True, default=str
        ),
        "endpoint": (session.url or "") + "/v1/responses",
        "server_settings": json.dumps(session.settings or {}, sort_keys=True),
        "gpu": json.dumps(
            {**session.gpu, "other_jobs": reached(session.other_gpu_jobs, [])}, sort_keys=True
        )
        if session.gpu
        else None,
        "startup": json.dumps(src.startup.figures()),
        "stage_times": json.dumps({k: v.wall_s for k, v in session.stages.items()}),
        "started_utc": _iso(session.session_started_ns),
        "ended_utc": _iso(reached(session.session_ended_ns)),
    }
