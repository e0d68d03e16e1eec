"""Retention on both backends: by age, beyond a count, a bounded batch per call, and the background
task that runs it."""

from __future__ import annotations

import asyncio

import pytest

from fixtures.store import ALICE, BOB, item, put_turn, response
from qualflow.server.store import Conversation, NotFound, StoreConfig, prune_once, retain


def stored_ids(store, ids):
    out = []
    for i in ids:
        try:
            out.append(store.get(ALICE, i).id)
        except NotFound:
            pass
    return out


def test_prune_by_age_deletes_the_old_with_their_items(store):
    for t in range(10):
        put_turn(store, f"r{t}", created_at=float(t))
    assert store.prune(now=10.0, max_age_s=5.0, max_responses=None, batch=100) == 5  # 0..4 < 5
    assert stored_ids(store, [f"r{t}" for t in range(10)]) == [f"r{t}" for t in range(5, 10)]
    put_turn(store, "r0", created_at=11.0)  # its items were deleted with it: their ids are free


def test_prune_by_count_keeps_the_newest_across_owners(store):
    for t in range(10):
        put_turn(store, f"r{t}", ALICE if t % 2 else BOB, created_at=float(t))
    assert store.prune(now=100.0, max_age_s=None, max_responses=3, batch=100) == 7
    assert [store.get(ALICE if t % 2 else BOB, f"r{t}").id for t in (7, 8, 9)] == ["r7", "r8", "r9"]
    with pytest.raises(NotFound):
        store.get(BOB, "r6")
    assert store.prune(now=100.0, max_age_s=None, max_responses=3, batch=100) == 0


def test_prune_deletes_at_most_a_batch_per_bound(store):
    for t in range(10):
        put_turn(store, f"r{t}", created_at=float(t))
    assert store.prune(now=100.0, max_age_s=None, max_responses=2, batch=3) == 3
    assert stored_ids(store, [f"r{t}" for t in range(10)]) == [
        f"r{t}" for t in (0, 1, 2, 3, 4, 8, 9)
    ]
    assert store.prune(now=100.0, max_age_s=95.0, max_responses=None, batch=2) == 2  # r0, r1
    with pytest.raises(ValueError):
        store.prune(now=0.0, max_age_s=1.0, max_responses=None, batch=0)


def test_prune_once_runs_batches_until_within_bounds(store):
    for t in range(12):
        put_turn(store, f"r{t}", created_at=float(t))
    config = StoreConfig(url="unused", max_age_s=None, max_responses=4, prune_batch=3)
    assert prune_once(store, config, now=100.0) == 8
    assert stored_ids(store, [f"r{t}" for t in range(12)]) == ["r8", "r9", "r10", "r11"]


def test_conversations_outlive_their_pruned_responses(store):
    store.create_conversation(Conversation("conv_1", ALICE, 0.0), [item("m0")])
    store.put(response("r1", conversation="conv_1", created_at=0.0), [item("u1")], [item("a1")])
    assert store.prune(now=1e9, max_age_s=1.0, max_responses=None, batch=10) == 1
    assert [d["id"] for d in store.list_items(ALICE, "conv_1", order="asc").data] == [
        "m0",
        "u1",
        "a1",
    ]


def test_background_task_prunes_and_stops(store):
    for t in range(5):
        put_turn(store, f"r{t}", created_at=float(t))
    config = StoreConfig(
        url="unused", max_age_s=None, max_responses=2, prune_interval_s=0.05, prune_batch=1
    )

    async def run():
        stop = asyncio.Event()
        task = asyncio.create_task(retain(store, config, stop))
        for _ in range(200):
            await asyncio.sleep(0.02)
            if not stored_ids(store, ["r0", "r1", "r2"]):
                break
        stop.set()
        await asyncio.wait_for(task, timeout=30)

    asyncio.run(run())
    assert stored_ids(store, [f"r{t}" for t in range(5)]) == ["r3", "r4"]


@pytest.mark.parametrize(
    "field, value",
    [("max_age_s", 0), ("max_responses", 0), ("prune_interval_s", 0), ("prune_batch", 0)],
)
def test_config_names_a_bad_bound(field, value):
    with pytest.raises(ValueError, match=field):
        StoreConfig(**{field: value})
