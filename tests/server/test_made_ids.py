"""The ids the server makes for requests that bring none (server/http/middleware.py): uuid4-shaped
and safe to echo, never the same twice in a process, another prefix in a forked child (an API
process). What a request without X-Request-ID gets back: test_server.py."""

from __future__ import annotations

import os
import uuid

from qualflow.server.http.middleware import _SAFE_ID, made_id


def test_made_ids_are_uuid4_shaped_and_unique():
    ids = [made_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(uuid.UUID(i).version == 4 and _SAFE_ID.match(i) for i in ids)
    assert len({i[:23] for i in ids}) == 1  # one prefix a process, a counter after it


def test_a_forked_process_makes_ids_of_its_own():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first id
        os.write(w, made_id().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(r, 100).decode()
    ours = made_id()
    assert child != ours and child[:23] != ours[:23]
