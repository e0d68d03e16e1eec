"""The engine's prefix cache: the block manager's chained keys, collision guard, reference counts
and LRU eviction (no model), and on the embedded model (CPU) greedy output identical with the cache
on and off (chunked, packed, padded prefill, overlapped scheduling, eviction, preemption, thinking),
every block accounted for, and `cached_tokens` the true count of prompt tokens not computed."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from qualflow.runtime import EngineConfig, GenerationRequest, load_task
from qualflow.runtime.api.events import TaskTiming
from qualflow.runtime.api.request import SamplingParams, Thinking
from qualflow.runtime.engine import block_manager
from qualflow.runtime.engine.block_manager import RESERVED_BLOCKS, BlockManager
from qualflow.runtime.engine.sequence import PLACEHOLDER, Sequence, put_ids


# ---- the block manager alone --------------------------------------------------------------------
def seq(tokens: list[int]) -> Sequence:
    req = GenerationRequest("r", list(tokens), SamplingParams(max_new_tokens=4))
    return Sequence(req, lambda item: None, TaskTiming(submitted_ns=0))


def admit(bm: BlockManager, tokens: list[int]) -> tuple[Sequence, list[int]]:
    """A sequence admitted as the scheduler does, its whole prompt computed: (it, its hits)."""
    s = seq(tokens)
    hits = bm.match(s)
    bm.take(s, hits)
    bm.allocate(s, len(tokens))
    s.num_computed = len(tokens)
    bm.commit(s)  # as the scheduler does at the next step's start
    return s, hits


def accounted(bm: BlockManager) -> bool:
    return (
        len(bm.free) + len(bm.evictable) == bm.capacity
        and bm.num_free == bm.capacity
        and not any(bm.refs)
    )


def test_full_blocks_chain_and_the_last_token_is_recomputed():
    bm = BlockManager(1 + 16, 4)
    a, hits = admit(bm, list(range(10)))
    assert hits == [] and len(a.block_table) == 3
    bm.release(a)
    assert len(bm.evictable) == 2 and accounted(bm)  # two full blocks cached, the partial one not
    assert len(bm.match(seq(list(range(12))))) == 2  # both blocks, chained
    assert len(bm.match(seq(list(range(8))))) == 1  # its last token's block is computed again
    assert len(bm.match(seq([0, 1, 2, 3, 9, 9, 9, 9, 9]))) == 1  # the chain breaks at block 2
    assert bm.match(seq([4, 5, 6, 7, 0, 1, 2, 3, 9])) == []  # same tokens, other position: a miss


def test_keys_extend_in_pieces_as_in_one():
    """Keys made a few blocks at a time (a prompt, then its output as it fills blocks) equal the
    chain made at once, and each is block_hash of its parent and its own tokens."""
    tokens = list(range(100, 100 + 4 * 9))
    bm, whole, grown = BlockManager(32, 4), seq(tokens), seq(tokens)
    bm._hashes(whole, len(tokens))
    for n in (3, 9, 10, 27, len(tokens)):
        bm._hashes(grown, n)
    assert grown.block_hashes == whole.block_hashes and len(whole.block_hashes) == 9
    parent = 0
    for i, h in enumerate(whole.block_hashes):
        assert h == block_manager.block_hash(parent, tokens[4 * i : 4 * i + 4])
        parent = h


def test_put_ids_reads_a_placeholder_as_zero():
    out = np.full(6, 7, np.int64)
    put_ids(out[1:5], [5, 151_643, PLACEHOLDER, 2])
    assert out.tolist() == [7, 5, 151_643, 0, 2, 7]


def test_shared_blocks_are_counted_and_cached_once_free():
    bm = BlockManager(1 + 16, 4)
    a, _ = admit(bm, list(range(10)))
    b, hits = admit(bm, list(range(9)))
    assert hits == a.block_table[:2] and [bm.refs[x] for x in hits] == [2, 2]
    assert b.num_computed == 9 and bm.hit_blocks == 2
    bm.release(a)
    assert [bm.refs[x] for x in hits] == [1, 1] and not bm.evictable  # b still holds them
    bm.release(b)
    assert set(bm.evictable) == set(hits) and accounted(bm)


def test_a_hash_collision_is_a_miss(monkeypatch):
    monkeypatch.setattr(block_manager, "block_hash", lambda parent, tokens: 7)
    bm = BlockManager(1 + 16, 4)
    a, _ = admit(bm, list(range(10)))
    bm.release(a)
    assert len(bm.cached) == 1  # block 1 collided with block 0: left out, not overwritten
    assert bm.match(seq([9, 9, 9, 9, 9, 9])) == []  # same key, other tokens
    assert len(bm.match(seq([0, 1, 2, 3, 0, 1, 2, 3, 9]))) == 1  # same key and tokens, other parent
    b, hits = admit(bm, [0, 1, 2, 3, 0, 1, 2, 3, 9])
    assert len(hits) == 1 and b.block_table[1] not in bm.keys  # computed again, not served
    bm.release(b)
    assert accounted(bm)


def test_eviction_takes_the_least_recently_freed_first():
    bm = BlockManager(RESERVED_BLOCKS + 6, 2)
    a, _ = admit(bm, [1, 1, 2, 2, 3])  # 3 blocks, 2 of them full
    b, _ = admit(bm, [5, 5, 6, 6, 7])
    ta, tb = list(a.block_table), list(b.block_table)
    bm.release(a)
    bm.release(b)
    assert list(bm.evictable) == [ta[1], ta[0], tb[1], tb[0]]  # each sequence's tail first
    assert set(bm.free) == {ta[2], tb[2]}  # partial blocks are never cached
    c, hits = admit(bm, [1, 1, 2, 2, 4])  # a's prefix used again: now the most recently freed
    assert len(hits) == 2
    bm.release(c)
    d, _ = admit(bm, [8] * 9)  # 5 blocks: the 2 never-cached free blocks, then 3 evicted
    assert bm.num_evicted == 3
    assert len(bm.match(seq([1, 1, 2, 2, 9]))) == 1  # a's tail block went, its first block stayed
    assert bm.match(seq([5, 5, 6, 6, 9])) == []  # b's blocks, freed before a's reuse: both went
    bm.release(d)
    assert accounted(bm)


def test_caching_off_keeps_nothing():
    bm = BlockManager(1 + 8, 4, caching=False)
    a, _ = admit(bm, list(range(10)))
    bm.release(a)
    assert not bm.cached and not bm.evictable and bm.match(seq(list(range(10)))) == []
    assert accounted(bm)


# ---- on the embedded model ----------------------------------------------------------------------
BASE = list(range(100, 150))  # a 50-token shared prefix: 6 full blocks of 8


def greedy(n: int) -> SamplingParams:
    return SamplingParams(max_new_tokens=n, temperature=0.0, ignore_eos=True)


def spy_prompt_tokens(task) -> dict[str, int]:
    """Prompt tokens each request ran through the model (positions below its prompt's length)."""
    seen: dict[str, int] = {}
    real = task.engine.runner.run

    def run(batch, *args):
        for s, start, n in zip(batch.seqs, batch.starts, batch.counts):
            p = len(s.req.prompt_token_ids)
            seen[s.req.request_id] = seen.get(s.req.request_id, 0) + max(
                0, min(start + n, p) - start
            )
        return real(batch, *args)

    task.engine.runner.run = run
    return seen


def conversation(task) -> list:
    """Sequential requests: three sharing BASE, then turn 2 of the first (its prompt, its output,
    new tokens)."""
    finals = [
        task.generate_sync(GenerationRequest(f"s{i}", BASE + tail, greedy(6)))
        for i, tail in enumerate([[1, 2, 3], [4] * 13, [5]])
    ]
    turn2 = BASE + [1, 2, 3] + finals[0].token_ids + [7, 8, 9]
    return finals + [task.generate_sync(GenerationRequest("turn2", turn2, greedy(6)))]


def run_batch(task, reqs) -> list:
    async def one(r):
        final = None
        async for ev in task.generate(r):
            final = ev
        return final

    async def main():
        return await asyncio.gather(*[one(r) for r in reqs])

    return asyncio.run(main())


def cfg(**kw) -> EngineConfig:
    base = dict(device="cpu", max_batch=4, max_context=256, block_size=8, cpu_threads=1)
    return EngineConfig(**(base | kw))


def check_accounted(task) -> None:
    bm = task.engine.scheduler.blocks
    assert accounted(bm), (len(bm.free), len(bm.evictable), bm.capacity)


@pytest.fixture(scope="module")
def uncached(bundle_dir):
    task = load_task(bundle_dir, cfg(prefix_caching=False))
    try:
        finals = conversation(task)
        assert [f.timing.cached_tokens for f in finals] == [0, 0, 0, 0]
        assert not task.engine.scheduler.blocks.cached
        yield [f.token_ids for f in finals]
    finally:
        task.close()


def test_cached_output_and_count_are_exact(bundle_dir, uncached):
    task = load_task(bundle_dir, cfg(max_num_batched_tokens=16))  # chunked: 16 a step
    try:
        seen = spy_prompt_tokens(task)
        finals = conversation(task)
        assert [f.token_ids for f in finals] == uncached  # token for token, greedy
        # turn 1 of s0 computed 53 prompt tokens and 5 of its 6 output tokens (the last is never
        # fed back): 58 tokens, 7 full blocks, all of which turn 2 (69 + 3 tokens) finds
        assert [f.timing.cached_tokens for f in finals] == [0, 48, 48, 56]
        for f in finals:
            assert seen[f.request_id] == f.prompt_tokens - f.timing.cached_tokens
        bm = task.engine.scheduler.blocks
        assert bm.hit_blocks * bm.block_size == sum(f.timing.cached_tokens for f in finals)
        check_accounted(task)
    finally:
        task.close()


@pytest.mark.parametrize(
    "variant",
    [
        dict(async_scheduling="on", prefill_graphs="on", prefill_graph_tokens=128),
        dict(mixed=True, max_num_batched_tokens=24),
    ],
    ids=["async-padded", "mixed-chunked"],
)
def test_overlapped_padded_and_mixed_match(bundle_dir, uncached, variant):
    task = load_task(bundle_dir, cfg(**variant))
    try:
        fresh_steps = []
        if task.engine.runner.prefill is not None:
            real = task.engine.runner.prefill.prefill

            def padded(batch, *args):
                fresh_steps.append(list(batch.starts))
                return real(batch, *args)

            task.engine.runner.prefill.prefill = padded
        finals = conversation(task)
        assert [f.token_ids for f in finals] == uncached
        assert [f.timing.cached_tokens for f in finals] == [0, 48, 48, 56]
        # a step that starts after a cached prefix is never the fresh (padded) one
        assert all(s == 0 for starts in fresh_steps for s in starts)
        assert fresh_steps or task.engine.runner.prefill is None
        # packed: four prompts with the same prefix at once (the first computes it, none waits)
        batch = run_batch(
            task, [GenerationRequest(f"b{i}", BASE + [i] * (i + 1), greedy(5)) for i in range(4)]
        )
        assert all(f.finish_reason == "length" for f in batch)
        check_accounted(task)
    finally:
        task.close()


def test_eviction_and_preemption_keep_greedy_output(bundle_dir):
    """A pool of one full-context sequence (96 tokens, 24 blocks of 4) and six requests sharing a
    prefix: blocks are evicted and sequences preempted, and the output is what each gets alone."""
    prompts = [BASE[:30] + [i] * (3 + i) for i in range(6)]
    small = dict(max_context=96, block_size=4)
    alone = load_task(bundle_dir, cfg(max_batch=1, prefix_caching=False, **small))
    try:
        expected = [
            alone.generate_sync(GenerationRequest(f"a{i}", p, greedy(30))).token_ids
            for i, p in enumerate(prompts)
        ]
    finally:
        alone.close()
    task = load_task(
        bundle_dir, cfg(max_batch=6, kv_cache_gb=1e-9, max_num_batched_tokens=24, **small)
    )
    try:
        reqs = [GenerationRequest(f"p{i}", p, greedy(30)) for i, p in enumerate(prompts)]
        finals = run_batch(task, reqs)
        finals += run_batch(task, reqs[:2])  # again, after the pool turned over
        assert [f.token_ids for f in finals] == expected + expected[:2]
        sched = task.engine.scheduler
        assert sched.num_preemptions > 0 and sched.blocks.num_evicted > 0
        assert any(f.timing.cached_tokens for f in finals)
        check_accounted(task)
    finally:
        task.close()


def test_thinking_budget_unaffected(bundle_dir):
    prompt = BASE + [1, 2, 3]
    outs = {}
    for on in (False, True):
        task = load_task(bundle_dir, cfg(prefix_caching=on))
        try:
            finals = [
                task.generate_sync(GenerationRequest(f"t{i}", prompt, greedy(10), Thinking(3)))
                for i in range(2)
            ]
            assert finals[1].timing.cached_tokens == (48 if on else 0)
            outs[on] = [(f.token_ids, f.reasoning_tokens) for f in finals]
            check_accounted(task)
        finally:
            task.close()
    assert outs[True] == outs[False]
