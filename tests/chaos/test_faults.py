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
