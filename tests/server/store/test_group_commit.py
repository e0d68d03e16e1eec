"""Group commit (the SQLite store's puts; it works on both backends): puts waiting together are
committed by one transaction, and one that fails (a taken id) fails alone, the rest of its group
stored."""

from __future__ import annotations

import threading
import time

import sqlalchemy as sa

from fixtures.store import ALICE, item, response
from qualflow.server.store import DuplicateId
from qualflow.server.store.group_commit import GroupCommit


def put_together(store, ids: list[str]) -> dict[str, BaseException | None]:
    """Put a response per id from a thread each, all queued while a write is under way; the
    outcome of each (None: stored)."""
    outcome: dict[str, BaseException | None] = {}
    writes = GroupCommit(store.engine)

    def put(rid: str) -> None:
        try:
            writes.put(response(rid), [item(f"in_{rid}")], [item(f"out_{rid}")])
            outcome[rid] = None
        except Exception as e:
            outcome[rid] = e

    with writes._leading:  # a group being written: the puts queue behind it
        threads = [threading.Thread(target=put, args=(rid,)) for rid in ids]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(writes._queue) < len(ids):
            assert time.monotonic() < deadline, "the puts did not queue"
            time.sleep(0.01)
    for t in threads:
        t.join(timeout=60)
    return outcome


def test_puts_waiting_together_share_one_commit(store):
    commits = []
    sa.event.listen(store.engine, "commit", lambda conn: commits.append(1))
    ids = [f"resp_{i}" for i in range(8)]
    assert put_together(store, ids) == dict.fromkeys(ids)
    assert len(commits) == 1
    for rid in ids:
        assert store.get(ALICE, rid).id == rid
        assert [i["id"] for i in store.chain(ALICE, rid).context()] == [f"in_{rid}", f"out_{rid}"]


def test_a_put_that_fails_fails_alone(store):
    store.put(response("resp_taken"), [item("first")], [])
    outcome = put_together(store, ["resp_a", "resp_taken", "resp_b"])
    assert isinstance(outcome.pop("resp_taken"), DuplicateId)
    assert outcome == {"resp_a": None, "resp_b": None}
    assert [i["id"] for i in store.input_items(ALICE, "resp_taken").data] == ["first"]
    assert {store.get(ALICE, r).id for r in ("resp_a", "resp_b")} == {"resp_a", "resp_b"}


def test_the_sqlite_store_groups_its_commits(store_url):
    from qualflow.server.store import open_store

    store = open_store(store_url)
    try:
        grouped = store._group is not None
    finally:
        store.close()
    assert grouped == store_url.startswith("sqlite")
