"""The session directory: emptied of an earlier session's outputs at the start; at the end every
output written (the ones a failed stage never wrote, empty), session.json, and with `archive_dir`
a copy of it all under archive_dir/<run_id>/."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from .cache_off import CACHE_OFF_DIR
from .ceiling import CEILING_DIR
from .records import NOT_REACHED, SessionRecord, StartupRecord


def write_missing_outputs(out: Path) -> None:
    """After a failure: the outputs a stage never wrote, empty, so the rule's outputs exist and the
    join can record the rung reached."""
    from .outputs import write_protocol, write_warmup

    if not (out / "warmup.parquet").exists():
        write_warmup([], str(out / "warmup.parquet"))
    if not (out / "protocol.parquet").exists():
        write_protocol([], str(out / "protocol.parquet"))
    if not (out / "startup.json").exists():
        StartupRecord.never_healthy().write(out / "startup.json")
    (out / "server_timing.jsonl").touch()


def archive(out: Path, archive_dir: Path, run_id: str) -> Path:
    """Keep this session's raw artifacts under archive_dir/<run_id>/, as copies: a hard link would
    share its inode with the session directory's file, which a later run rewrites or appends to."""
    dest = archive_dir / run_id
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(out, dest, copy_function=shutil.copy2)
    return dest


def finish_outputs(out: Path, record: SessionRecord, archive_dir: str | None) -> None:
    """The cleanup's writes, each on its own: one that fails is recorded, never skips the others."""
    steps = [
        ("missing outputs", lambda: write_missing_outputs(out)),
        ("session.json", lambda: record.write(out / "session.json")),
    ]
    if archive_dir and record.run_id:
        steps.append(("archive", lambda: archive(out, Path(archive_dir), record.run_id)))
    for name, step in steps:
        try:
            step()
        except Exception as e:  # noqa: BLE001 - reported; the remaining writes still happen
            print(
                f"session: error writing {name}: {type(e).__name__}: {e}",
                file=sys.stderr,
                flush=True,
            )
            if record.cleanup_errors is NOT_REACHED:
                record.cleanup_errors = []
            record.cleanup_errors.append(f"{name}: {type(e).__name__}: {e}")
            if name == "archive":  # session.json is already written: add the error to it
                record.write(out / "session.json")


def fresh_out(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "points").mkdir(exist_ok=True)
    for stale in (
        "session.json",
        "startup.json",
        "warmup.parquet",
        "protocol.parquet",
        "server_timing.jsonl",
    ):
        (out / stale).unlink(missing_ok=True)
    for rerun in (CEILING_DIR, CACHE_OFF_DIR):  # an earlier session's reruns are not this one's
        shutil.rmtree(out / rerun, ignore_errors=True)
    return out
