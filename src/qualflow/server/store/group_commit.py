"""Group commit: the puts of concurrent threads (the server's worker threads, one per request
being stored) written in one transaction and made durable by one commit (SQLite: one WAL fsync;
PostgreSQL: one WAL flush), instead of one commit each, one after another.

A put waits until the transaction holding it has committed, so a response is on disk before its
put returns (and before the server tells the client it completed), as with a commit of its own.
The first waiting thread leads: it takes every put queued so far, writes each in a savepoint (one
that fails, say a taken id, is rolled back and raises in its own thread only) and commits; puts that
arrive meanwhile go to the next leader. Between this process's writers there is no lock contention
(SQLite's busy-wait backs off by up to 100 ms). A put appending to a conversation commits alone:
it locks the conversation's row, and several such locks in one transaction could deadlock with
another server's."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future

from sqlalchemy.engine import Engine

from . import responses_sql
from .engine import write_tx
from .records import JSON, StoredResponse

Put = tuple[StoredResponse, Sequence[JSON], Sequence[JSON]]


class GroupCommit:
    def __init__(self, engine: Engine):
        self.engine = engine
        self._queue: list[tuple[Put, Future]] = []
        self._queued = threading.Lock()  # guards _queue
        self._leading = threading.Lock()  # held by the thread writing a group

    def put(
        self, response: StoredResponse, inputs: Sequence[JSON], outputs: Sequence[JSON]
    ) -> None:
        """responses_sql.put, committed with the puts of other threads waiting at the time."""
        if response.conversation_id is not None:
            with self._leading:
                return responses_sql.put(self.engine, response, inputs, outputs)
        done: Future = Future()
        with self._queued:
            self._queue.append(((response, inputs, outputs), done))
        while not done.done():
            with self._leading:
                if done.done():
                    break
                with self._queued:
                    group, self._queue = self._queue, []
                self._commit(group)
        done.result()

    def _commit(self, group: list[tuple[Put, Future]]) -> None:
        errors: dict[int, BaseException] = {}
        try:
            with write_tx(self.engine) as conn:
                for i, (put, _) in enumerate(group):
                    try:
                        with conn.begin_nested():
                            responses_sql.insert(conn, *put)
                    except Exception as e:
                        errors[i] = e
        except BaseException as e:  # the commit failed: every put of the group fails with it
            for _, done in group:
                done.set_exception(e)
            if not isinstance(e, Exception):
                raise
            return
        for i, (_, done) in enumerate(group):
            if i in errors:
                done.set_exception(errors[i])
            else:
                done.set_result(None)
