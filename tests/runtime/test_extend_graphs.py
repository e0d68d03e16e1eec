"""Prefill steps past position 0 padded to a token and a context bucket (extend_graphs.py; captured
on cuda, run eagerly here): the padded inputs put the pad tokens in a filler sequence writing to and
reading the scratch slot and the spare context rows in a sequence of no queries; each padded step's
logits equal the unpadded step's, and greedy output equals the eager engine's token for token with
cached prefixes, chunked prompts, several sequences in one step, overlapped scheduling and
preemption; every block is free after."""

from __future__ import annotations

import asyncio

import pytest
import torch

from qualflow.runtime import EngineConfig, GenerationRequest, SamplingParams, load_task
from qualflow.runtime.engine.extend_graphs import (
    ExtendGraphs,
    bucket_pairs,
    context_buckets,
    pad_extend_step,
)
from qualflow.runtime.engine.scheduler import Batch

BASE = list(range(100, 150))  # a 50-token shared prefix


class _Seq:
    def __init__(self, ids, table):
        self.token_ids, self.block_table = ids, table


def test_buckets_and_padding():
    assert context_buckets(6528) == [512, 1024, 2048, 4096, 6528]
    assert context_buckets(100) == [100]
    assert bucket_pairs([16, 32, 64], [32, 100]) == [(16, 32), (16, 100), (32, 100), (64, 100)]
    # a: 2 cached tokens then 3 new at blocks [3, 5]; b: fresh, 2 tokens (one a placeholder)
    batch = Batch([_Seq([5, 6, 7, 8, 9], [3, 5]), _Seq([4, -1], [1])], [2, 0], [3, 2], [True, True])
    s = pad_extend_step(batch, 8, 16, 3, block_size=4)
    assert s.ids.tolist() == [7, 8, 9, 4, 0, 0, 0, 0]  # a placeholder reads 0
    assert s.positions.tolist() == [2, 3, 4, 0, 1, 0, 1, 2]  # pads: their own positions 0..
    assert s.slots.tolist() == [14, 15, 20, 4, 5, 0, 0, 0]  # pads: the scratch slot
    assert s.ctx.tolist() == [12, 13, 14, 15, 20, 4, 5] + [0] * 9  # fillers: the scratch slot
    assert s.q_lens == [3, 2, 3, 0, 0] and s.k_lens == [5, 2, 3, 6, 0]
    assert s.cu_q.tolist() == [0, 3, 5, 8, 8, 8] and s.cu_k.tolist() == [0, 5, 7, 10, 16, 16]
    assert s.logit_rows.tolist() == [2, 4, 0] and s.sampling == 2
    with pytest.raises(ValueError, match="context bucket"):
        pad_extend_step(batch, 8, 8, 3, block_size=4)


def test_pick_takes_the_smallest_pair_that_holds_the_step():
    ext = ExtendGraphs.__new__(ExtendGraphs)
    ext.max_seqs, ext.tokens, ext.contexts = 2, [16, 32], [32, 64]
    a, b = _Seq([1] * 40, [1]), _Seq([1] * 40, [2])
    assert ext.pick(Batch([a], [0], [10], [True])) is None  # fresh: the fresh graphs' step
    assert ext.pick(Batch([a], [10], [10], [True])) == (16, 32)  # 20 rows + 6 pads
    assert ext.pick(Batch([a], [20], [10], [True])) == (16, 64)  # 30 rows + 6 pads
    assert ext.pick(Batch([a, b], [20, 0], [10, 10], [True, True])) == (32, 64)
    assert ext.pick(Batch([a], [30], [40], [True])) is None  # 40 tokens: no token bucket
    assert ext.pick(Batch([a], [60], [10], [True])) is None  # 76 rows: no context bucket
    assert ext.pick(Batch([a, b, a], [9, 9, 9], [1, 1, 1], [True] * 3)) is None  # 3 sequences


def greedy(n: int) -> SamplingParams:
    return SamplingParams(max_new_tokens=n, temperature=0.0, ignore_eos=True)


def cfg(**kw) -> EngineConfig:
    base = dict(device="cpu", max_batch=4, max_context=160, block_size=8, cpu_threads=1)
    return EngineConfig(**(base | kw))


def workload(task) -> list[list[int]]:
    """A conversation reusing its prefix (three requests, then turn 2 of the first), then four
    prompts sharing the prefix at once: cached prefixes, and several sequences in one step."""
    finals = [
        task.generate_sync(GenerationRequest(f"s{i}", BASE + tail, greedy(6)))
        for i, tail in enumerate([[1, 2, 3], [4] * 13, [5]])
    ]
    turn2 = BASE + [1, 2, 3] + finals[0].token_ids + [7, 8, 9]
    finals.append(task.generate_sync(GenerationRequest("turn2", turn2, greedy(6))))

    async def one(r):
        return [ev async for ev in task.generate(r)][-1]

    async def packed():
        reqs = [GenerationRequest(f"b{i}", BASE + [i] * (9 * i + 1), greedy(5)) for i in range(4)]
        return await asyncio.gather(*[one(r) for r in reqs])

    return [f.token_ids for f in finals + list(asyncio.run(packed()))]


@pytest.fixture(scope="module")
def eager_output(bundle_dir):
    task = load_task(bundle_dir, cfg(prefill_graphs="off"))
    try:
        assert task.info["extend_graphs"] is None
        yield workload(task)
    finally:
        task.close()


def spy_extend(task, check_logits: bool) -> list[tuple[list[int], list[int]]]:
    """(starts, counts) of each padded step past position 0; with `check_logits`, each one's logits
    compared with the same step unpadded (run first: it stores the same K/V the padded one does)."""
    runner, seen = task.engine.runner, []
    ext = runner.extend
    real = ext.extend

    def extend(batch, fills=((), ()), prev=None):
        seen.append((list(batch.starts), list(batch.counts)))
        if check_logits:
            runner.extend = None
            try:
                plain = runner.run(batch, prev)
            finally:
                runner.extend = ext
        out = real(batch, fills, prev)
        if check_logits:
            torch.testing.assert_close(out, plain, rtol=1e-4, atol=1e-4)
        return out

    ext.extend = extend
    return seen


@pytest.mark.parametrize(
    "variant",
    [
        dict(max_num_batched_tokens=24),
        dict(
            async_scheduling="on",
            kv_cache_gb=1e-9,
            max_context=96,
            max_num_batched_tokens=40,
            block_size=4,
        ),
    ],
    ids=["chunked", "async-preempted"],
)
def test_padded_extend_equals_unpadded(bundle_dir, eager_output, variant):
    task = load_task(bundle_dir, cfg(prefill_graphs="on", prefill_graph_tokens=64, **variant))
    try:
        assert task.info["extend_graphs_note"] == "eager"
        seen = spy_extend(task, check_logits=True)
        assert workload(task) == eager_output
        assert any(s > 0 for starts, _ in seen for s in starts)
        assert max(len(starts) for starts, _ in seen) > 1  # several sequences in one padded step
        sched = task.engine.scheduler
        if "kv_cache_gb" in variant:
            assert sched.num_preemptions > 0
        assert sched.blocks.num_free == sched.blocks.capacity
    finally:
        task.close()


def test_context_zero_runs_those_steps_eagerly(bundle_dir, eager_output):
    task = load_task(bundle_dir, cfg(prefill_graphs="on", prefill_graph_context=0))
    try:
        assert task.info["extend_graphs"] is None
        assert task.info["extend_graphs_note"] == "off: --prefill-graph-context 0"
        paths = []
        real = task.engine.runner.run

        def run(batch, *a):
            out = real(batch, *a)
            paths.append(task.engine.runner.path)
            return out

        task.engine.runner.run = run
        assert workload(task) == eager_output
        assert "eager" in paths and "prefill-graph" in paths and "extend-graph" not in paths
    finally:
        task.close()


def force_extend_kernel(task, fresh: bool) -> list[tuple[int, bool]]:
    """The extend kernel's path turned on here (it is chosen on CUDA only; its torch reference runs
    on CPU), for fresh steps too with `fresh`: returns a list that grows by (splits, whether the
    step is fresh) per layer call it serves."""
    attn, calls = task.engine.runner.attn, []
    real = attn._extend

    def extend(layer, q, m):
        calls.append((m.splits, bool(m.tiles[:, 3].eq(0).all() and m.ctx_lens.max() <= len(q))))
        return real(layer, q, m)

    attn.extend_kernel, attn.extend_fresh, attn.sms, attn._extend = True, fresh, 132, extend
    return calls


@pytest.mark.parametrize(
    "graphs,fresh", [("off", False), ("on", False), ("on", True)], ids=["eager", "padded", "fresh"]
)
def test_extend_kernel_path_equals_the_gathered_one(bundle_dir, eager_output, graphs, fresh):
    """Prefill steps through the extend kernel's tables (engine.extend_meta), past position 0 (and
    fresh ones with `fresh`), eager and padded to the buckets, give the gathered path's greedy
    output; every block is free after."""
    task = load_task(
        bundle_dir, cfg(prefill_graphs=graphs, prefill_graph_tokens=64, max_num_batched_tokens=24)
    )
    try:
        assert task.info["extend_attention"].startswith("gather")  # CPU: chosen on CUDA only
        calls = force_extend_kernel(task, fresh)
        assert workload(task) == eager_output
        assert calls and max(s for s, _ in calls) > 1  # through it, some with context splits
        assert any(f for _, f in calls) == fresh  # fresh steps only where asked
        assert task.engine.runner.attn.extends(24) and not task.engine.runner.attn.extends(2049)
        sched = task.engine.scheduler
        assert sched.blocks.num_free == sched.blocks.capacity
    finally:
        task.close()
