"""Overlapped scheduling (EngineConfig(async_scheduling="on")) on the embedded model (CPU,
eager): the same greedy tokens, finish reasons and token counts as the step-at-a-time engine,
with stop tokens, max_output_tokens, cancel mid-stream, preemption and chunked prefill; batched
equals alone; every block free after a run; timing stamps ordered; the captured-decode step (run
eagerly) and the engine process with it."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from qualflow.runtime import (
    EngineConfig,
    FinalEvent,
    GenerationRequest,
    SamplingParams,
    TokenEvent,
    load_task,
)

pytestmark = pytest.mark.timeout(300)
PROMPTS = [[1, 2, 3, 4, 5], [7] * 17, list(range(30, 70)), [99, 5], list(range(200, 260)), [42] * 9]
LENGTHS = [30, 12, 40, 25, 18, 33]
MAX_CONTEXT = 96


def greedy(n: int, stop: tuple[int, ...] = ()) -> SamplingParams:
    return SamplingParams(max_new_tokens=n, temperature=0, ignore_eos=not stop, stop_token_ids=stop)


async def _stream(task, req):
    return [ev async for ev in task.generate(req)]


def run_all(task, reqs) -> list[list]:
    """Every request submitted at once; each one's events."""

    async def go():
        return await asyncio.gather(*(_stream(task, r) for r in reqs))

    return asyncio.run(go())


def summary(events) -> tuple:
    """What must not depend on the scheduling: tokens, streamed tokens, reason, counts."""
    final = events[-1]
    assert isinstance(final, FinalEvent) and sum(isinstance(e, FinalEvent) for e in events) == 1
    streamed = [t for e in events[:-1] if isinstance(e, TokenEvent) for t in e.token_ids]
    return final.token_ids, streamed, final.finish_reason, final.completion_tokens, final.error


def assert_idle(task) -> None:
    blocks = task.engine.scheduler.blocks
    assert blocks.num_free == blocks.capacity  # every block is free again
    assert not task.engine.running and not task.engine.waiting


def assert_timing_ordered(events) -> None:
    t = events[-1].timing
    assert (
        t.submitted_ns
        <= t.first_scheduled_ns
        <= t.first_token_ns
        <= t.finished_ns
        <= time.time_ns()
    )


@pytest.fixture(scope="module")
def reference(bundle_dir):
    """The step-at-a-time engine, one request at a time: greedy outputs (ignore_eos) and the stop
    tokens that end each one early (its 8th output token: the first time that token comes)."""
    task = load_task(bundle_dir, EngineConfig(max_batch=1, max_context=MAX_CONTEXT))
    try:
        plain = [
            task.generate_sync(GenerationRequest(f"a{i}", p, greedy(n))).token_ids
            for i, (p, n) in enumerate(zip(PROMPTS, LENGTHS))
        ]
        stops = [(out[7],) for out in plain]
        stopped = [
            summary(run_all(task, [GenerationRequest(f"s{i}", p, greedy(n, s))])[0])
            for i, (p, n, s) in enumerate(zip(PROMPTS, LENGTHS, stops))
        ]
        yield plain, stops, stopped
    finally:
        task.close()


def workload(stops, with_stops: bool) -> list[GenerationRequest]:
    """The six prompts, half of them ending at a stop token when `with_stops`."""
    reqs = []
    for i, (p, n) in enumerate(zip(PROMPTS, LENGTHS)):
        stop = stops[i] if with_stops and i % 2 == 0 else ()
        reqs.append(GenerationRequest(f"w{i}", p, greedy(n, stop)))
    return reqs


@pytest.mark.parametrize(
    "engine",
    [
        {},  # one batch, packed prefill
        {
            "kv_cache_gb": 1e-9,
            "block_size": 4,
            "max_num_batched_tokens": 24,
        },  # preemption + chunked prefill
        {"kv_cache_gb": 1e-9, "block_size": 4, "max_num_batched_tokens": 24, "mixed": True},
        {"max_num_batched_tokens": 16, "mixed": True},  # chunks mixed with decodes
    ],
)
def test_async_equals_step_at_a_time(bundle_dir, reference, engine):
    plain, stops, stopped = reference
    base = dict(max_batch=6, max_context=MAX_CONTEXT, **engine)
    results = {}
    for mode in (False, True):
        task = load_task(bundle_dir, EngineConfig(async_scheduling="on" if mode else "off", **base))
        try:
            evs = run_all(task, workload(stops, with_stops=True))
            results[mode] = [summary(e) for e in evs]
            for e in evs:
                assert_timing_ordered(e)
            assert_idle(task)
            if engine.get("kv_cache_gb"):
                assert task.engine.scheduler.num_preemptions > 0
        finally:
            task.close()
    assert results[True] == results[False]  # token for token, reasons, counts
    got = results[True]
    for i, (toks, streamed, reason, count, error) in enumerate(got):  # and batched equals alone
        want = stopped[i] if i % 2 == 0 else (plain[i], plain[i], "length", LENGTHS[i], None)
        assert (toks, streamed, reason, count, error) == want
        assert streamed == toks and count == len(toks)


def spy(task) -> list[tuple[list[str], list[bool]]]:
    """Per model step: the request ids in it, and whether each one's input token was still on the
    device (sampled by the step before, not read back yet) when the step was built."""
    steps, real = [], task.engine.runner.run

    def run(batch, *args):
        steps.append(
            ([s.req.request_id for s in batch.seqs], [s.pending is not None for s in batch.seqs])
        )
        return real(batch, *args)

    task.engine.runner.run = run
    return steps


def test_steps_overlap_and_no_step_is_wasted_on_a_finished_length(bundle_dir, reference):
    """The overlap is real: every decode step is built before its input token is read back. A
    request that ends at max_output_tokens runs exactly the steps it runs step at a time (its
    last token's step is never followed by a wasted one); one that stops runs one step more,
    discarded."""
    plain, stops, stopped = reference
    counts = {}
    for mode in (False, True):
        task = load_task(
            bundle_dir,
            EngineConfig(
                max_batch=2, max_context=MAX_CONTEXT, async_scheduling="on" if mode else "off"
            ),
        )
        try:
            steps = spy(task)
            reqs = [
                GenerationRequest("len", PROMPTS[1], greedy(LENGTHS[1])),
                GenerationRequest("stop", PROMPTS[0], greedy(LENGTHS[0], stops[0])),
            ]
            evs = run_all(task, reqs)
            assert summary(evs[0])[0] == plain[1] and summary(evs[1]) == stopped[0]
            counts[mode] = {r: sum(r in ids for ids, _ in steps) for r in ("len", "stop")}
            decode_pending = [p for ids, ps in steps for p in ps]
            assert any(decode_pending) == mode
            if mode:  # all but the prefill step of each request take their input from the device
                assert sum(decode_pending) == sum(counts[mode].values()) - 2
            assert_idle(task)
        finally:
            task.close()
    assert counts[True]["len"] == counts[False]["len"] == LENGTHS[1]
    assert counts[True]["stop"] == counts[False]["stop"] + 1


def test_cancel_mid_stream(bundle_dir, reference):
    plain = reference[0]
    task = load_task(
        bundle_dir,
        EngineConfig(
            max_batch=4, max_context=MAX_CONTEXT, async_scheduling="on", step_delay_s=0.01
        ),
    )
    try:

        async def scenario():
            other = asyncio.ensure_future(
                _stream(task, GenerationRequest("keep", PROMPTS[2], greedy(LENGTHS[2])))
            )
            events, n = [], 0
            async for ev in task.generate(GenerationRequest("c", PROMPTS[0], greedy(LENGTHS[0]))):
                events.append(ev)
                n += isinstance(ev, TokenEvent)
                if n == 3:
                    task.cancel("c")
            return events, await other

        events, kept = asyncio.run(scenario())
        toks, streamed, reason, count, _ = summary(events)
        assert reason == "cancelled"
        assert (
            3 <= count < LENGTHS[0] and toks == streamed == plain[0][:count]
        )  # a prefix, all counted
        assert summary(kept)[:3] == (plain[2], plain[2], "length")  # the other one goes on
        assert_timing_ordered(events)
        assert_idle(task)
    finally:
        task.close()


def test_captured_decode_step_async(bundle_dir, reference):
    """The decode-graph path (run eagerly: same static buffers, block tables updated in place, the
    pending token copied on the device), with rows changing owner as requests end and new ones come,
    and preemption giving a sequence a new table."""
    from qualflow.runtime.engine.cuda_graphs import DecodeGraphs

    plain, stops, stopped = reference
    task = load_task(
        bundle_dir,
        EngineConfig(
            max_batch=3,
            max_context=MAX_CONTEXT,
            async_scheduling="on",
            kv_cache_gb=1e-9,
            block_size=4,
            max_num_batched_tokens=32,
        ),
    )
    try:
        runner = task.engine.runner
        with task.engine.lock:
            runner.graphs = DecodeGraphs(
                task.model, runner.attn, 3, task._max_blocks, task.device, capture=False
            )
        steps = spy(task)
        evs = run_all(task, workload(stops, with_stops=True)[:6])
        for i, e in enumerate(evs):
            want = stopped[i] if i % 2 == 0 else (plain[i], plain[i], "length", LENGTHS[i], None)
            assert summary(e) == want
        assert (
            sum(all(ps) and len(ps) > 1 for _, ps in steps) > 0
        )  # batched decode steps from the device
        assert task.engine.scheduler.num_preemptions > 0
        assert_idle(task)
    finally:
        task.close()


def test_engine_process_async(bundle_dir, reference):
    plain, stops, stopped = reference
    loaded = []
    cfg = EngineConfig(
        max_batch=6, max_context=MAX_CONTEXT, engine_process="on", async_scheduling="on"
    )
    loader = threading.Thread(target=lambda: loaded.append(load_task(bundle_dir, cfg)))
    loader.start()
    loader.join()
    task = loaded[0]
    try:
        assert task.info["async_scheduling"] is True
        evs = run_all(task, workload(stops, with_stops=True))
        for i, e in enumerate(evs):
            want = stopped[i] if i % 2 == 0 else (plain[i], plain[i], "length", LENGTHS[i], None)
            assert summary(e) == want
            assert_timing_ordered(e)
    finally:
        task.close()


def test_engine_delivers_nothing_after_final(bundle_dir, reference):
    """At the engine's sink (below the Task, which would drop a late item): a stopped or cancelled
    request's overlapped-step token is never delivered nor added to its output."""
    import queue

    from qualflow.runtime.engine.outputs import Final, Tokens

    plain, stops, stopped = reference
    task = load_task(
        bundle_dir, EngineConfig(max_batch=6, max_context=MAX_CONTEXT, async_scheduling="on")
    )
    try:
        engine, finals = task.engine, queue.SimpleQueue()
        items: dict[str, list] = {}

        def sink_of(rid):
            items[rid] = []
            return lambda item: (
                items[rid].append(item),
                isinstance(item, Final) and finals.put(rid),
            )

        reqs = workload(stops, with_stops=True)
        seqs = [engine.submit(r, sink_of(r.request_id)) for r in reqs]
        for _ in reqs:
            finals.get(timeout=120)
        engine.submit(
            GenerationRequest("after", [3, 4], greedy(2)), sink_of("after")
        )  # steps past the last flight
        assert finals.get(timeout=120) == "after"
        for i, (r, s) in enumerate(zip(reqs, seqs)):
            got = items[r.request_id]
            assert isinstance(got[-1], Final) and all(isinstance(x, Tokens) for x in got[:-1])
            delivered = [t for x in got[:-1] for t in x.ids]
            want = stopped[i][0] if i % 2 == 0 else plain[i]
            assert delivered == s.out == want
            assert s.token_ids == r.prompt_token_ids + want  # no placeholder, no extra token left
        assert_idle(task)
    finally:
        task.close()


def test_auto_overlaps_on_cuda_only_and_the_flag_says_so():
    """`--async-scheduling auto` (the default): on for cuda, where it measured 1.1-1.6x on an H200,
    off for cpu; `on`/`off` force it; the flag takes the three words."""
    import argparse

    from qualflow.configs import add_arguments, from_args

    assert EngineConfig().async_scheduling == "auto"
    assert EngineConfig().overlaps("cuda") and not EngineConfig().overlaps("cpu")
    assert EngineConfig(async_scheduling="on").overlaps("cpu")
    assert not EngineConfig(async_scheduling="off").overlaps("cuda")
    p = argparse.ArgumentParser()
    add_arguments(p, EngineConfig)
    assert (
        from_args(EngineConfig, p.parse_args(["--async-scheduling", "on"])).async_scheduling == "on"
    )
    with pytest.raises(SystemExit):
        p.parse_args(["--async-scheduling", "yes"])
