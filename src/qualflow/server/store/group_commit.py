"""Group commit: the puts of concurrent threads (the server's worker threads, one per request
being stored) written in one transaction and made durable by one commit (SQLite: one WAL fsync),
instead of one commit each, one after another. SqlStore uses it on SQLite, whose writers take turns
anyway; PostgreSQL runs concurrent transactions in parallel and groups their WAL flushes itself
(serializing them here was slower there).

A put waits until the transaction holding it has committed, so a response is on disk before its
put returns (and before the server tells the client it completed), as with a commit of its own.
The first waiting thread leads: it takes every put queued so far, writes them and commits; puts
that arrive meanwhile go to the next leader. A group that fails (say, a taken id) is rolled back and
each of its puts is tried again alone, so that only the failing one raises, in its own thread.
Between this process's writers there is no lock contention (SQLite's busy-wait backs off by up to
100 ms). A put appending to a conversation commits alone: it locks the conversation's row, and
several such locks in one transaction could deadlock with another server's."""

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
        try:
            with write_tx(self.engine) as conn:
                for put, _ in group:
                    responses_sql.insert(conn, *put)
        except Exception as e:
            if len(group) == 1:
                group[0][1].set_exception(e)
                return
            for k, one in enumerate(group):  # rolled back: each again alone (only one fails)
                try:
                    self._commit([one])
                except BaseException as stop:  # interrupted: the rest are not retried
                    for _, done in group[k + 1 :]:
                        done.set_exception(stop)
                    raise
            return
        except BaseException as e:
            for _, done in group:
                done.set_exception(e)
            raise
        for _, done in group:
            done.set_result(None)
