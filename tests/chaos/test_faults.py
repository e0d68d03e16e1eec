"""The store-lock fault holds the cycle's own store in an exclusive transaction (a write from
elsewhere finds it locked), and leaves alone the file an earlier cycle left, until the session
makes its own."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from qualflow.chaos import faults
from qualflow.chaos.schedule import STORE_LOCK, Fault


def write(db, timeout=10.0):
    conn = sqlite3.connect(db, timeout=timeout)
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.commit()
    finally:
        conn.close()


def wait_until(cond, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.05)
    return cond()


def test_the_store_lock_holds_the_cycles_own_store(tmp_path):
    db = tmp_path / faults.STORE_FILE
    write(db)  # an earlier cycle's store
    time.sleep(0.05)
    inj = faults.Injection(Fault(STORE_LOCK, None, at_s=0.0, hold_s=60.0))
    stop = threading.Event()
    faults.start(inj, watcher=None, session=tmp_path, stop=stop, t0=time.monotonic())
    time.sleep(0.5)
    assert inj.hit_at_s is None  # not the earlier cycle's file
    write(db)  # the session's store now (its write changes the file)
    try:
        assert wait_until(lambda: inj.hit_at_s is not None), inj.outcome
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            write(db, timeout=0.2)
    finally:
        stop.set()
        assert inj.done.wait(30)
    write(db)  # released
    assert "store locked" in inj.outcome


WRITER = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("PRAGMA wal_autocheckpoint=0")  # the rows stay in the WAL
conn.execute("CREATE TABLE responses (id TEXT)")
conn.executemany("INSERT INTO responses VALUES (?)", [("resp_a",), ("resp_b",)])
conn.commit()
os._exit(0)  # killed: no checkpoint, the WAL and its index stay
"""


def test_after_a_full_disk_the_store_is_checked_once_the_filler_is_freed(tmp_path):
    """A killed server's store in WAL mode, its rows still in the WAL and no index file beside it,
    on a tmpfs that the disk-full fault filled: the check cannot open it (SQLite must write the
    WAL's index first: "disk I/O error", which ended a 50-cycle run at its 19th cycle) until the
    fault's filler is freed; then every acknowledged response is found. A store that cannot be
    read is a failed check that says why, never a crash of the run."""
    import subprocess
    import sys

    from qualflow.chaos import checks

    session = tmp_path / "session"
    why = faults.mount_tmpfs(session, "2m")
    if why:
        pytest.skip(f"no tmpfs here: {why}")
    try:
        db = session / faults.STORE_FILE
        subprocess.run([sys.executable, "-c", WRITER, str(db)], check=True)
        assert (session / f"{faults.STORE_FILE}-wal").exists()
        (session / f"{faults.STORE_FILE}-shm").unlink()  # the index is rebuilt by the next opener
        timing = tmp_path / "server_timing.jsonl"
        timing.write_text(
            "".join(
                f'{{"response_id": "{r}", "status": "completed", "store_write_ns": 1}}\n'
                for r in ("resp_a", "resp_b")
            )
        )
        faults.fill(session)
        full = checks.acknowledged_stored(timing, db)
        faults.free(session)
        freed = checks.acknowledged_stored(timing, db)
    finally:
        faults.unmount(session)
    assert not full.ok and "unreadable" in full.detail, full
    assert freed.ok, freed
