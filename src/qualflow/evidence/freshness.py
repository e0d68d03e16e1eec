"""Is an evidence directory still about what is on disk? The join records what it measured
(`measured.json` beside the tables: the serving session's directory and run id, the bundle's
directory, hash and the stat of each of its files); the status step re-verifies it, and evidence
that no longer matches is stale: its verdict must not stand.

- The session: its directory must still hold the run the evidence was joined from. A rerun that was
  cut off (the session killed, its outputs removed by Snakemake) leaves no `session.json`; a rerun
  that finished without a join leaves another run id.
- The bundle: its manifest must carry the hash the evidence measured, and every file must still
  match the manifest. A stat fingerprint decides what to hash: a file whose size and mtime are those
  recorded at the join is taken as unchanged (no GB read per status), any other is hashed against
  the manifest (so a touched but identical file, or a deterministic rebuild, is not stale). A change
  that keeps both the size and the mtime is left to the bundle's verified load, which hashes every
  file.

The workflow reruns before it gets here (workflow/rules/common.smk: the bundle's stat fingerprint
is a param of the jobs that load it, and `qualify` names the session outputs), so this is the
check that holds whatever ran: a hand-run `qualflow status`, other rerun triggers, a later edit."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from qualflow.files import sha256_file, stat_tree
from qualflow.session.records import SessionRecord, run_id_of

MEASURED = "measured.json"
STALE = "stale evidence"


@dataclass(frozen=True)
class Measured:
    """measured.json: what an evidence directory's tables were measured on. Paths are relative to
    the evidence directory, so that a moved results tree still resolves."""

    session_dir: str
    session_run_id: str
    model: str
    profile: str
    bundle_dir: str | None = None  # None: an endpoint (no bundle)
    bundle_hash: str | None = None
    bundle_files: dict[str, list[int]] = field(default_factory=dict)  # path -> [size, mtime_ns]

    @classmethod
    def of(
        cls,
        evidence_dir: str | Path,
        session_dir: str | Path,
        run_id: str,
        model: str,
        profile: str,
        bundle_dir: str | Path | None,
        bundle_hash: str | None,
    ) -> Measured:
        def rel(p):
            return os.path.relpath(Path(p).resolve(), Path(evidence_dir).resolve())

        return cls(
            session_dir=rel(session_dir),
            session_run_id=run_id,
            model=model,
            profile=profile,
            bundle_dir=rel(bundle_dir) if bundle_dir else None,
            bundle_hash=bundle_hash,
            bundle_files=stat_tree(bundle_dir) if bundle_dir else {},
        )

    def write(self, evidence_dir: str | Path) -> None:
        (Path(evidence_dir) / MEASURED).write_text(
            json.dumps(asdict(self), indent=1, sort_keys=True)
        )

    @classmethod
    def read(cls, evidence_dir: str | Path) -> Measured | None:
        """The record, or None where there is none (evidence written before it, a history copy)."""
        p = Path(evidence_dir) / MEASURED
        return cls(**json.loads(p.read_text())) if p.exists() else None


def _session_reasons(m: Measured, session: Path) -> list[str]:
    record = session / "session.json"
    if not record.exists():
        return [
            f"the serving session {session} holds no session.json (a rerun of it was cut off), "
            f"the evidence is of run {m.session_run_id}"
        ]
    rec = SessionRecord.read(record)
    run_id = rec.run_id or run_id_of(
        m.model, m.profile, rec.session_started_ns or 0
    )  # as the join names it
    if run_id != m.session_run_id:
        return [
            f"the serving session {session} holds run {run_id}, the evidence is of run "
            f"{m.session_run_id}"
        ]
    return []


def _bundle_reasons(m: Measured, bundle: Path) -> list[str]:
    manifest_path = bundle / "manifest.json"
    if not manifest_path.exists():
        return [f"the bundle {bundle} has no manifest.json (removed or rebuilt since the run)"]
    manifest = json.loads(manifest_path.read_text())
    if manifest.get("bundle_hash") != m.bundle_hash:
        return [
            f"the bundle {bundle} was rebuilt with other content (bundle_hash "
            f"{manifest.get('bundle_hash')}, the evidence measured {m.bundle_hash})"
        ]
    now, changed = stat_tree(bundle), []
    for name, meta in sorted(manifest.get("files", {}).items()):
        if name not in now:
            changed.append(f"{name} is missing")
        elif now[name] != m.bundle_files.get(name) and (
            now[name][0] != meta.get("size") or sha256_file(bundle / name) != meta.get("sha256")
        ):
            changed.append(f"{name} no longer matches its sha256 in the manifest")
    if changed:
        return [f"the bundle {bundle} changed since the run: {', '.join(changed)}"]
    return []


def stale_reasons(evidence_dir: str | Path) -> list[str]:
    """Why the evidence in `evidence_dir` no longer describes what is on disk ([] if it still does,
    or if it records nothing to check)."""
    m = Measured.read(evidence_dir)
    if m is None:
        return []
    here = Path(evidence_dir)
    reasons = _session_reasons(m, Path(os.path.normpath(here / m.session_dir)))
    if m.bundle_dir is not None:
        reasons += _bundle_reasons(m, Path(os.path.normpath(here / m.bundle_dir)))
    return [f"{STALE}: {r}" for r in reasons]
