"""Paged KV cache and the token-budget scheduler on the embedded model (CPU, eager): packed and
chunked prefill, preemption by recompute, block accounting."""

from __future__ import annotations

import asyncio

import pytest

from qualflow.runtime import EngineConfig, GenerationRequest, load_task

TEXTS = [
    "Hi",
    "Tell me about the sea in many words please",
    "1 2 3",
    "¿Qué tal? 🐍",
    "x" * 40,
    "ok",
]


def greedy(task, n):
    return task.default_params(max_new_tokens=n, temperature=0.0, ignore_eos=True)


def requests(task, lengths):
    return [
        GenerationRequest(
            f"p{i}", task.render_prompt(None, [{"role": "user", "content": t}]), greedy(task, n)
        )
        for i, (t, n) in enumerate(zip(TEXTS, lengths))
    ]


async def _gather(task, reqs):
    async def one(r):
        final = None
        async for ev in task.generate(r):
            final = ev
        return final

    return await asyncio.gather(*[one(r) for r in reqs])


def spy_steps(task):
    """Record (counts, starts) of every scheduled step."""
    steps, real = [], task.engine.runner.run

    def run(batch, *args):
        steps.append((list(batch.counts), list(batch.starts)))
        return real(batch, *args)

    task.engine.runner.run = run
    return steps


@pytest.fixture(scope="module")
def alone(bundle_dir):
    task = load_task(bundle_dir, EngineConfig(device="cpu", max_batch=1, max_context=96))
    try:
        lengths = [30, 25, 40, 20, 12, 35]
        yield lengths, [task.generate_sync(r).token_ids for r in requests(task, lengths)]
    finally:
        task.close()


@pytest.mark.parametrize("mixed", [False, True])
def test_small_pool_preempts_and_matches_alone(bundle_dir, alone, mixed):
    lengths, expected = alone
    # one full-context sequence (96 tokens = 24 blocks of 4) is all the pool holds; six requests of
    # ~40-70 tokens each need far more, so the newest are preempted and recomputed
    task = load_task(
        bundle_dir,
        EngineConfig(
            device="cpu",
            max_batch=6,
            max_context=96,
            kv_cache_gb=1e-9,
            block_size=4,
            max_num_batched_tokens=24,
            mixed=mixed,
        ),
    )
    try:
        steps = spy_steps(task)
        finals = asyncio.run(_gather(task, requests(task, lengths)))
        sched = task.engine.scheduler
        assert [f.finish_reason for f in finals] == ["length"] * 6
        assert [f.token_ids for f in finals] == expected  # token for token, greedy
        assert sched.num_preemptions > 0
        assert max(sum(c) for c, _ in steps) <= 24  # the budget holds every step
        assert sched.blocks.num_free == sched.blocks.capacity  # every block is free again
        assert not task.engine.running and not task.engine.waiting
    finally:
        task.close()


def test_chunked_prompt_interleaves_decodes(bundle_dir):
    """Alternating mode: while a long prompt is prefilled chunk by chunk, the running decode gets a
    step between every two chunks."""
    task = load_task(
        bundle_dir,
        EngineConfig(
            device="cpu",
            max_batch=2,
            max_context=256,
            block_size=8,
            max_num_batched_tokens=16,
            step_delay_s=0.0,
        ),
    )
    try:
        steps = spy_steps(task)
        short = GenerationRequest("short", [5] * 4, greedy(task, 40))
        long = GenerationRequest("long", list(range(100, 200)), greedy(task, 3))

        async def scenario():
            gen = task.generate(short)
            await gen.__anext__()  # "short" is decoding now
            t = asyncio.ensure_future(_gather(task, [long]))
            rest = [ev async for ev in gen]
            return rest[-1], (await t)[0]

        s, lg = asyncio.run(scenario())
        assert s.finish_reason == lg.finish_reason == "length"
        chunks = [i for i, (c, st) in enumerate(steps) if c[-1] > 1 and st[-1] > 0]
        assert len(chunks) >= 5  # 100 tokens in chunks of <= 16
        for a, b in zip(chunks, chunks[1:]):
            assert b - a >= 2  # a decode step between two chunks
        assert task.engine.scheduler.blocks.num_free == task.engine.scheduler.blocks.capacity
    finally:
        task.close()


def test_fifo_head_is_not_overtaken(bundle_dir):
    """A big waiting request at the head is not overtaken by later small ones while it waits for
    blocks."""
    task = load_task(
        bundle_dir,
        EngineConfig(
            device="cpu",
            max_batch=4,
            max_context=64,
            kv_cache_gb=1e-9,
            block_size=4,
            max_num_batched_tokens=64,
        ),
    )
    try:
        reqs = [
            GenerationRequest("a", [7] * 30, greedy(task, 20)),
            GenerationRequest("big", [8] * 40, greedy(task, 20)),
            GenerationRequest("c", [9] * 4, greedy(task, 4)),
        ]
        finals = asyncio.run(_gather(task, reqs))
        starts = [f.timing.first_scheduled_ns for f in finals]
        assert starts == sorted(starts)
        assert all(f.finish_reason == "length" for f in finals)
    finally:
        task.close()


def _seqs(lengths):
    from qualflow.runtime.api.events import TaskTiming
    from qualflow.runtime.engine.sequence import Sequence

    return [
        Sequence(GenerationRequest(f"s{i}", [3] * n), lambda item: None, TaskTiming(0))
        for i, n in enumerate(lengths)
    ]


def test_scheduler_packs_prompts_and_chunks_long_ones():
    """Deterministic, no engine thread: waiting prompts are packed into one step up to the budget,
    the rest of a long prompt continues in the next steps, and the decode of a finished prefill
    gets a step between two chunks."""
    from qualflow.runtime.engine.block_manager import BlockManager
    from qualflow.runtime.engine.scheduler import Scheduler

    cfg = EngineConfig(max_batch=8, max_num_batched_tokens=16, prefill_wait_factor=0.0)
    sched = Scheduler(cfg, BlockManager(200, 4))
    a, b, c = _seqs([5, 6, 40])
    for s in (a, b, c):
        sched.add(s)
    first = sched.schedule()
    assert (
        first.seqs == [a, b, c]
        and first.counts == [5, 6, 5]
        and first.samples == [True, True, False]
    )
    a.append(1)
    b.append(1)
    second = sched.schedule()  # alternating: the two decodes
    assert second.is_decode and second.seqs == [a, b]
    a.append(1)
    b.append(1)
    third = sched.schedule()  # the next chunk of the long prompt
    assert third.seqs == [c] and third.starts == [5] and third.counts == [16]
    assert sched.blocks.needed(c, 21) == 0  # its blocks cover what was computed


def _scheduler(budget: int, factor: float, max_batch: int = 8):
    from qualflow.runtime.engine.block_manager import BlockManager
    from qualflow.runtime.engine.scheduler import Scheduler

    cfg = EngineConfig(
        max_batch=max_batch, max_num_batched_tokens=budget, prefill_wait_factor=factor
    )
    return Scheduler(cfg, BlockManager(200, 4))


def _run_steps(sched, n, arrivals=None):
    """Schedule `n` steps, appending a token to each sequence a decode step ran; `arrivals`: step
    -> the sequences added just before it. The kinds of the steps and the last batch."""
    kinds, batch = [], None
    for step in range(n):
        for s in (arrivals or {}).get(step, ()):
            sched.add(s)
        batch = sched.schedule()
        kinds.append("decode" if batch.is_decode else "prefill")
        for s in batch.seqs if batch.is_decode else ():
            s.append(1)
    return kinds, batch


def _one_decoding(sched):
    (first,) = _seqs([5])
    sched.add(first)
    assert sched.schedule().seqs == [first]  # nothing decodes: at once
    first.append(1)
    return first


def test_a_prompt_waits_while_others_decode_until_its_wait_pays_for_a_prefill_step():
    """One request decodes; a prompt arriving alone waits 3 decode steps (factor 3 x 1 decoding);
    with a second arrival the two waits add up, so both go a step sooner, in one prefill step."""
    sched = _scheduler(64, 3.0)
    _one_decoding(sched)
    (late,) = _seqs([6])
    kinds, batch = _run_steps(sched, 4, {0: [late]})
    assert kinds == ["decode"] * 3 + ["prefill"] and batch.seqs == [late]

    sched = _scheduler(64, 3.0)
    _one_decoding(sched)
    late, later = _seqs([6, 7])
    kinds, batch = _run_steps(sched, 3, {0: [late], 1: [later]})
    assert kinds == ["decode", "decode", "prefill"] and batch.seqs == [late, later]
    assert sched.num_prefill_steps == 2 and sched.num_decode_steps == 2


def test_a_burst_that_finds_few_decodes_goes_after_one_decode_step():
    sched = _scheduler(1024, 1.0)
    _one_decoding(sched)
    burst = _seqs([6] * 6)
    kinds, batch = _run_steps(sched, 2, {0: burst})
    assert kinds == ["decode", "prefill"] and batch.seqs == burst


def test_factor_zero_alternates_at_every_step():
    sched = _scheduler(64, 0.0)
    _one_decoding(sched)
    (late,) = _seqs([6])
    kinds, batch = _run_steps(sched, 2, {0: [late]})
    assert kinds == ["decode", "prefill"] and batch.seqs == [late]


def test_prompts_that_fill_the_budget_do_not_wait():
    sched = _scheduler(16, 100.0)
    _one_decoding(sched)
    b, c = _seqs([10, 6])
    kinds, batch = _run_steps(sched, 3, {1: [b], 2: [c]})
    assert kinds == ["decode", "decode", "prefill"] and batch.seqs == [
        b,
        c,
    ]  # 10 tokens wait; 16 go


def test_only_the_prompts_a_full_batch_can_admit_count():
    """With one batch slot free, the second waiting prompt's wait does not count: it cannot be
    admitted."""
    sched = _scheduler(1024, 2.0, max_batch=2)
    _one_decoding(sched)
    a, b = _seqs([6, 6])
    kinds, batch = _run_steps(sched, 3, {0: [a, b]})
    assert kinds == ["decode", "decode", "prefill"] and batch.seqs == [a]


def test_the_prefill_wait_factor_must_not_be_negative():
    with pytest.raises(ValueError, match="prefill_wait_factor"):
        _scheduler(8, -1.0)


def test_staggered_arrivals_with_a_prefill_wait_match_alone(bundle_dir, alone):
    """Engine thread, real model: requests that arrive while others decode wait for a shared prefill
    step and still give, token for token, what each gives alone; the step counts add up and every
    block is free after. (Which step admits whom is the scheduler tests' above: deterministic.)"""
    lengths, expected = alone
    task = load_task(
        bundle_dir,
        EngineConfig(
            device="cpu", max_batch=6, max_context=96, prefill_wait_factor=4.0, step_delay_s=0.005
        ),
    )
    try:
        steps = spy_steps(task)

        async def staggered():
            reqs, tasks = requests(task, lengths), []
            for r in reqs:
                tasks.append(asyncio.ensure_future(_gather(task, [r])))
                await asyncio.sleep(0.03)  # one or two engine steps apart
            return [(await t)[0] for t in tasks]

        finals = asyncio.run(staggered())
        sched = task.engine.scheduler
        assert [f.token_ids for f in finals] == expected
        fresh = [i for i, (_, starts) in enumerate(steps) if 0 in starts]
        assert (
            sched.num_prefill_steps == len(fresh) < len(lengths)
        )  # some arrivals shared a prefill step
        assert sched.num_prefill_steps + sched.num_decode_steps == len(steps)
        assert sched.blocks.num_free == sched.blocks.capacity
    finally:
        task.close()


def test_the_cuda_pool_budget_counts_memory_the_caching_allocator_holds_unused(monkeypatch):
    """A Task closed earlier in the same process leaves its pool in torch's caching allocator,
    which the driver counts as used: the next Task's budget counts it as free (CUDA cannot run
    here, so the three allocator figures are given)."""
    import torch

    from qualflow.runtime.engine import kv_cache

    gb = 1 << 30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (40 * gb, 140 * gb))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 75 * gb)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 2 * gb)
    assert kv_cache.free_device_memory(torch.device("cuda")) == 113 * gb
