"""Injecting one fault of a cycle's plan, in its own thread: a signal to a process of the cycle's
tree (found by its role there), the session's results filled to the last byte on a tmpfs mounted
for the cycle, or the response store's SQLite file held in an exclusive transaction. Each records
what it did (`Injection.outcome`), or why it did nothing."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .procs import TreeWatcher
from .schedule import DISK_FULL, STORE_LOCK, Fault

STORE_FILE = "store.db"  # the session's store (qualflow.session.state.STORE_FILE)
FILLER = "chaos-filler.bin"


@dataclass
class Injection:
    fault: Fault
    outcome: str = "not injected: the cycle ended before its target appeared"
    hit_at_s: float | None = None  # seconds after the cycle started
    done: threading.Event = field(default_factory=threading.Event)


def _wait_for(cond: Callable[[], object], stop: threading.Event) -> object:
    """`cond()` once it is truthy, None if `stop` is set first."""
    while not stop.is_set():
        if got := cond():
            return got
        stop.wait(0.1)
    return None


def _signal(inj: Injection, watcher: TreeWatcher, stop: threading.Event, t0: float) -> None:
    f = inj.fault
    if not _wait_for(lambda: watcher.find(f.target), stop) or stop.wait(f.at_s):
        return
    procs = sorted(watcher.find(f.target), key=lambda p: p.pid)
    if not procs:
        inj.outcome = f"not injected: no {f.target} alive at the moment"
        return
    p = procs[0]
    try:
        os.kill(p.pid, getattr(signal, f.signal))
    except ProcessLookupError:
        inj.outcome = f"not injected: {f.target} {p.pid} ended at the moment"
        return
    inj.hit_at_s = time.monotonic() - t0
    inj.outcome = f"{f.signal} to {f.target} pid {p.pid} at {inj.hit_at_s:.1f}s"


def mount_tmpfs(path: Path, size: str) -> str | None:
    """Mount a tmpfs of `size` on `path` (made empty first); None, or why it could not."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    return None if r.returncode == 0 else f"mount failed: {r.stderr.strip() or r.returncode}"


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(path: Path) -> int:
    """Write a filler file in `path` until the filesystem is full; the bytes written."""
    n, chunk = 0, b"\0" * (1 << 16)
    try:
        with open(path / FILLER, "wb") as fh:
            while True:
                fh.write(chunk)
                fh.flush()
                n += len(chunk)
    except OSError:
        pass
    return n


def free(path: Path) -> None:
    """The disk-full fault is over: its filler goes, as an operator frees the disk (what the run
    wrote before the disk filled stays; SQLite needs room to open its WAL for the checks)."""
    (path / FILLER).unlink(missing_ok=True)


def _disk_full(inj: Injection, session: Path, stop: threading.Event, t0: float) -> None:
    if stop.wait(inj.fault.at_s):
        return
    n = fill(session)
    inj.hit_at_s = time.monotonic() - t0
    inj.outcome = f"results disk filled ({n >> 10} KiB) at {inj.hit_at_s:.1f}s"


def _store_lock(inj: Injection, session: Path, stop: threading.Event, t0: float) -> None:
    db = session / STORE_FILE
    started = time.time() - (time.monotonic() - t0)  # the cycle's start, wall clock

    def fresh() -> bool:  # this cycle's store: the session makes a new one when it starts
        try:
            return db.stat().st_ctime >= started
        except OSError:
            return False

    if not _wait_for(fresh, stop) or stop.wait(inj.fault.at_s):
        return
    try:
        conn = sqlite3.connect(db, timeout=5, isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
    except sqlite3.Error as e:
        inj.outcome = f"not injected: could not lock the store ({e})"
        return
    inj.hit_at_s = time.monotonic() - t0
    stop.wait(inj.fault.hold_s)
    conn.execute("ROLLBACK")
    conn.close()
    inj.outcome = f"store locked at {inj.hit_at_s:.1f}s for {inj.fault.hold_s:.1f}s"


def start(
    inj: Injection, watcher: TreeWatcher, session: Path, stop: threading.Event, t0: float
) -> threading.Thread:
    """Run the injection in a thread (it ends early once `stop` is set)."""
    kind = inj.fault.kind

    def run():
        try:
            if kind == DISK_FULL:
                _disk_full(inj, session, stop, t0)
            elif kind == STORE_LOCK:
                _store_lock(inj, session, stop, t0)
            else:
                _signal(inj, watcher, stop, t0)
        finally:
            inj.done.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t
