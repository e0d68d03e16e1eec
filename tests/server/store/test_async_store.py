"""AsyncStore: the store's calls as coroutines, each on a worker thread, never on the event
loop's."""

from __future__ import annotations

import asyncio
import threading

from fixtures.store import ALICE, item, response
from qualflow.server.store import AsyncStore, Conversation, ResponseStore, SqlStore


def test_sql_store_is_a_response_store(store):
    assert isinstance(store, SqlStore) and isinstance(store, ResponseStore)


def test_calls_run_off_the_loop_thread(store):
    threads = []

    class Recording:
        def __getattr__(self, name):
            method = getattr(store, name)

            def call(*args, **kwargs):
                threads.append(threading.get_ident())
                return method(*args, **kwargs)

            return call

    async def run():
        s = AsyncStore(Recording())
        await s.put(response("r1"), [item("u1")], [item("a1")])
        await s.put(response("r2", previous="r1"), [item("u2")], [item("a2")])
        chain = await s.chain(ALICE, "r2")
        page = await s.input_items(ALICE, "r2", order="asc", limit=1)
        await s.create_conversation(Conversation("conv_1", ALICE, 1.0), [item("m1")])
        items = await s.list_items(ALICE, "conv_1")
        return threading.get_ident(), chain, page, items

    loop_thread, chain, page, items = asyncio.run(run())
    assert [i["id"] for i in chain.context()] == ["u1", "a1", "u2", "a2"]
    assert page.first_id == "u2" and items.first_id == "m1"
    assert len(threads) == 6 and loop_thread not in threads
