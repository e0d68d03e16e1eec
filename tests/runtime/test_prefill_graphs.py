"""Fresh prefill steps padded to a token bucket (EngineConfig.prefill_graphs; captured on cuda,
run eagerly here): the padded inputs put the pad tokens in a filler sequence writing to the
scratch slot, and greedy output equals the unpadded engine token for token, with several prompts
in one step, a pending token, chunked prompts and preemption; every block is free after."""

from __future__ import annotations

import asyncio

from qualflow.runtime import EngineConfig, GenerationRequest, SamplingParams, load_task
from qualflow.runtime.engine.prefill_graphs import pad_fresh_step, token_buckets
from qualflow.runtime.engine.scheduler import Batch

PROMPTS = [[1, 2, 3], [7] * 17, list(range(30, 70)), [99, 5, 8, 13, 21]]
LENGTHS = [16, 12, 20, 16]


class _Seq:
    def __init__(self, ids, table):
        self.token_ids, self.block_table = ids, table


def test_buckets_and_padding():
    assert token_buckets(2048) == [16, 32, 64, 128, 256, 512, 768, 1024, 1280, 1536, 1792, 2048]
    assert token_buckets(100) == [16, 32, 64, 100]
    batch = Batch(
        [_Seq([5, 6, 7], [3]), _Seq([8, 9, -1, 4, 4], [1, 2])], [0, 0], [3, 5], [True, False]
    )
    s = pad_fresh_step(batch, 16, 4, block_size=4)
    assert s.ids.tolist() == [5, 6, 7, 8, 9, 0, 4, 4] + [0] * 8  # a placeholder reads 0
    assert s.positions.tolist() == [0, 1, 2, 0, 1, 2, 3, 4] + list(range(8))
    assert s.slots.tolist() == [12, 13, 14, 4, 5, 6, 7, 8] + [0] * 8  # pads: the scratch slot
    assert s.lens == [3, 5, 8, 0, 0] and s.cu.tolist() == [0, 3, 8, 16, 16, 16]
    assert s.logit_rows.tolist() == [2, 0, 0, 0] and s.sampling == 1


def _run(task, stagger: bool) -> list[list[int]]:
    async def one(i, p, n):
        if stagger:
            await asyncio.sleep(0.05 * i)
        req = GenerationRequest(
            f"r{i}", p, SamplingParams(max_new_tokens=n, temperature=0, ignore_eos=True)
        )
        return [ev async for ev in task.generate(req)][-1].token_ids

    async def go():
        runs = [
            asyncio.ensure_future(one(i, p, n)) for i, (p, n) in enumerate(zip(PROMPTS, LENGTHS))
        ]
        if (
            not stagger
        ):  # every prompt is in the inbox before the first step ends, however busy the machine
            with task.engine.lock:
                await asyncio.sleep(0.05)
        return await asyncio.gather(*runs)

    return asyncio.run(go())


def _padded_steps(task) -> list[int]:
    seen, real = [], task.engine.runner.prefill.prefill

    def spy(batch, *a):
        seen.append(len(batch.seqs))
        return real(batch, *a)

    task.engine.runner.prefill.prefill = spy
    return seen


def test_padded_prefill_equals_unpadded(bundle_dir):
    cfg = dict(max_batch=4, max_context=96, async_scheduling="on")
    plain = load_task(bundle_dir, EngineConfig(**cfg, prefill_graphs="off"))
    try:
        assert plain.info["prefill_graphs"] is None
        expected = _run(plain, stagger=False)
    finally:
        plain.close()
    # a pool of one full-context sequence and a 24-token budget: chunked prompts and preemption too
    task = load_task(
        bundle_dir,
        EngineConfig(
            **cfg,
            prefill_graphs="on",
            prefill_graph_tokens=64,
            kv_cache_gb=1e-9,
            block_size=4,
            max_num_batched_tokens=24,
        ),
    )
    try:
        assert (
            task.info["prefill_graphs"] == [16, 24] and task.info["prefill_graphs_note"] == "eager"
        )
        seen = _padded_steps(task)
        assert _run(task, stagger=False) == expected
        assert max(seen) > 1  # several prompts in one padded step
        assert task.engine.scheduler.num_preemptions > 0
        assert _run(task, stagger=True) == expected  # one prompt a step
        blocks = task.engine.scheduler.blocks
        assert blocks.num_free == blocks.capacity
    finally:
        task.close()
