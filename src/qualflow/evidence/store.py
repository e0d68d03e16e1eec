"""The versioned evidence store: listing and resolving runs.

Layout (under the root, `results/evidence` by default)::

    <software_key>/<model>/<profile>/*.parquet                   the latest run (the DAG's outputs)
    <software_key>/<model>/<profile>/history/<run_id>/*.parquet  every run ever joined, kept

`qualflow join` writes both (`archive_run`), so a re-qualification of the same software version is a
new run id beside the earlier ones, never a silent overwrite. Re-joining the *same* serving session
gives the same run id and rewrites that run's copy with the same content.

A run is named by `VERSION` (the latest run of every model/profile under that software key),
`RUN_ID` (one run, in whichever version holds it), `VERSION@RUN_ID`, or the path of an evidence
directory."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from qualflow.evidence.schema import SCHEMA_VERSION, TABLE_NAMES

HISTORY = "history"


class StoreError(ValueError):
    """A run spec that names nothing, or names several runs where one is needed."""


@dataclass(frozen=True)
class RunRef:
    version: str
    run_id: str
    model: str
    profile: str
    path: Path  # directory holding the five tables of this run
    started_utc: str | None = None

    @property
    def label(self) -> str:
        return f"{self.version}@{self.run_id}"


def write_table(df: pd.DataFrame, path: Path) -> None:
    """One evidence table as parquet, stamped with the evidence schema version."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    df = df.copy()
    for c in df.columns:  # object columns holding mixed python values: store as strings
        if df[c].dtype == object and df[c].map(lambda v: isinstance(v, (dict, list))).any():
            df[c] = df[c].map(lambda v: None if v is None else json.dumps(v, default=str))
    table = pa.Table.from_pandas(df, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[b"qualflow_evidence_schema_version"] = SCHEMA_VERSION.encode()
    pq.write_table(table.replace_schema_metadata(meta), path)


def archive_run(out: str | Path, run_id: str, tables: tuple[str, ...] = TABLE_NAMES) -> Path:
    """Copy the tables just written to `out` into `out/history/<run_id>/` (idempotent per run
    id)."""
    out = Path(out)
    dest = out / HISTORY / run_id
    dest.mkdir(parents=True, exist_ok=True)
    for t in tables:
        src = out / f"{t}.parquet"
        if src.exists():
            tmp = dest / f".{t}.parquet.tmp"
            shutil.copyfile(src, tmp)
            tmp.replace(dest / f"{t}.parquet")
    return dest


def _run_dirs(root: Path):
    """(version, dir) of every directory holding a runs.parquet: latest copies and history."""
    if not root.is_dir():
        return
    for runs in sorted(root.glob("*/*/*/runs.parquet")) + sorted(
        root.glob(f"*/*/*/{HISTORY}/*/runs.parquet")
    ):
        rel = runs.relative_to(root).parts
        yield rel[0], runs.parent


def _refs_in(version: str, d: Path) -> list[RunRef]:
    try:
        runs = pd.read_parquet(
            d / "runs.parquet", columns=["run_id", "model", "profile", "started_utc"]
        )
    except (OSError, ValueError, KeyError):
        return []
    return [
        RunRef(version, r["run_id"], r["model"], r["profile"], d, r["started_utc"])
        for r in runs.drop_duplicates("run_id").to_dict("records")
    ]


def list_runs(root: str | Path = "results/evidence") -> list[RunRef]:
    """Every run in the store, one ref per (version, run id); the history copy wins over the latest
    copy of the same run (they hold the same tables)."""
    seen: dict[tuple[str, str], RunRef] = {}
    for version, d in _run_dirs(Path(root)):
        for ref in _refs_in(version, d):
            k = (ref.version, ref.run_id)
            if k not in seen or HISTORY in d.parts:
                seen[k] = ref
    return sorted(
        seen.values(), key=lambda r: (r.version, r.model, r.profile, r.started_utc or "", r.run_id)
    )


def latest(refs: list[RunRef]) -> list[RunRef]:
    """The latest run of each (version, model, profile)."""
    best: dict[tuple[str, str, str], RunRef] = {}
    for r in refs:
        k = (r.version, r.model, r.profile)
        if k not in best or (r.started_utc or "", r.run_id) > (
            best[k].started_utc or "",
            best[k].run_id,
        ):
            best[k] = r
    return sorted(best.values(), key=lambda r: (r.version, r.model, r.profile))


def resolve(spec: str, root: str | Path = "results/evidence") -> list[RunRef]:
    """The runs a spec names (see the module docstring)."""
    root = Path(root)
    p = Path(spec)
    if (p / "runs.parquet").exists():
        version = (
            p.parts[-3]
            if len(p.parts) >= 3 and HISTORY not in p.parts
            else (p.parts[-5] if len(p.parts) >= 5 else str(p))
        )
        refs = _refs_in(version, p)
        if refs:
            return refs
    refs = list_runs(root)
    if "@" in spec:
        v, rid = spec.split("@", 1)
        hit = [r for r in refs if r.version == v and r.run_id == rid]
        if not hit:
            raise StoreError(
                f"no run {rid!r} under version {v!r} in {root} (see `qualflow evidence list`)"
            )
        return hit
    by_version = [r for r in refs if r.version == spec]
    if by_version:
        return latest(by_version)
    by_run = [r for r in refs if r.run_id == spec]
    if len(by_run) == 1:
        return by_run
    if len(by_run) > 1:
        raise StoreError(
            f"run id {spec!r} exists under several versions "
            f"({', '.join(sorted(r.version for r in by_run))}); name it as VERSION@RUN_ID"
        )
    known = sorted({r.version for r in refs})
    raise StoreError(
        f"{spec!r} names no version, run id or evidence directory in {root} "
        f"(versions: {', '.join(known) or 'none'}; see `qualflow evidence list`)"
    )


def load(refs: list[RunRef]) -> dict[str, pd.DataFrame]:
    """The five tables of the given runs, concatenated, restricted to those runs' rows, with a
    `store_version` column naming the software key the run was found under."""
    out: dict[str, list[pd.DataFrame]] = {t: [] for t in TABLE_NAMES}
    for r in refs:
        for t in TABLE_NAMES:
            f = r.path / f"{t}.parquet"
            if f.exists():
                df = pd.read_parquet(f)
                if "run_id" in df and len(df):
                    df = df[df["run_id"] == r.run_id]
                df = df.assign(store_version=r.version)
                out[t].append(df)
    return {t: (pd.concat(v, ignore_index=True) if v else pd.DataFrame()) for t, v in out.items()}


def listing(root: str | Path = "results/evidence") -> pd.DataFrame:
    """One row per run and workload point: version, run, model, profile, workload point, status."""
    rows = []
    refs = list_runs(root)
    newest = {(r.version, r.model, r.profile): r.run_id for r in latest(refs)}
    for r in refs:
        runs = pd.read_parquet(r.path / "runs.parquet")
        runs = runs[runs["run_id"] == r.run_id]
        for x in runs.to_dict("records"):
            rows.append(
                {
                    "version": r.version,
                    "run_id": r.run_id,
                    "model": r.model,
                    "profile": r.profile,
                    "point_id": x.get("point_id"),
                    "status": x.get("status"),
                    "started_utc": (r.started_utc or "")[:19],
                    "latest": newest.get((r.version, r.model, r.profile)) == r.run_id,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "version",
            "run_id",
            "model",
            "profile",
            "point_id",
            "status",
            "started_utc",
            "latest",
        ],
    )


def main_evidence_list(a) -> int:
    df = listing(a.root)
    if df.empty:
        print(f"no evidence under {a.root}")
        return 0
    df["latest"] = df["latest"].map({True: "*", False: ""})
    with pd.option_context(
        "display.width", 250, "display.max_colwidth", 60, "display.max_rows", 10000
    ):
        print(df.to_string(index=False))
    print(
        f"\n{df['version'].nunique()} version(s), "
        f"{df[['version', 'run_id']].drop_duplicates().shape[0]} run(s); "
        "* = latest run of its version/model/profile (what `qualflow compare --base VERSION` uses)"
    )
    return 0
