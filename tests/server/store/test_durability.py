"""A put that has returned survives its process being killed (SIGKILL) at once: on SQLite, the WAL
was synced at commit (synchronous=FULL); on PostgreSQL, the server had committed it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from fixtures.store import ALICE
from qualflow.server.store import open_store

CHILD = """
import sys, time
from qualflow.server.store import StoredResponse, open_store
store = open_store(sys.argv[1])
store.put(StoredResponse("r1", sys.argv[2], 1.0, "tiny", "completed", {"id": "r1"}),
          [{"id": "u1", "type": "message"}], [{"id": "a1", "type": "message"}])
print("stored", flush=True)
time.sleep(600)
"""


def test_a_returned_put_survives_kill_9(store_url):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, store_url, ALICE],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = child.stdout.readline()
        assert line == "stored\n", child.stderr.read()
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    store = open_store(store_url)
    try:
        assert store.get(ALICE, "r1").response == {"id": "r1"}
        assert [i["id"] for i in store.chain(ALICE, "r1").context()] == ["u1", "a1"]
    finally:
        store.close()
