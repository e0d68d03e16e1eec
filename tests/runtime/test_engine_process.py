"""The engine in its own process (EngineConfig(engine_process="on")), at the Task level on CPU:
the same greedy tokens and text as the in-process engine, timing stamps ordered, cancel and
scoring across the process boundary, one message per engine step, a killed engine surfacing
through health() and ending open requests, and no process left after close()."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest

from qualflow.runtime import (
    EngineConfig,
    EngineFailed,
    FinalEvent,
    GenerationRequest,
    SamplingParams,
    TokenEvent,
    load_task,
)

pytestmark = pytest.mark.timeout(120)
GREEDY = SamplingParams(max_new_tokens=24, temperature=0, ignore_eos=True)
PROMPTS = [[1, 2, 3, 4, 5], [7] * 17, list(range(30, 70)), [99, 5]]


@pytest.fixture(scope="module")
def tasks(bundle_dir):
    loaded = []  # loaded on a thread that then ends, as the server loads its Task
    remote_cfg = EngineConfig(max_batch=4, max_context=256, engine_process="on")
    loader = threading.Thread(target=lambda: loaded.append(load_task(bundle_dir, remote_cfg)))
    loader.start()
    loader.join()
    remote = loaded[0]
    local = load_task(bundle_dir, EngineConfig(max_batch=4, max_context=256))
    yield remote, local
    remote.close()
    local.close()


def gone(pid: int, timeout_s: float = 10) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


async def collect(task, req):
    return [ev async for ev in task.generate(req)]


def test_same_output_as_in_process_and_ordered_timing(tasks):
    remote, local = tasks
    assert remote.info["engine_pid"] not in (None, os.getpid())
    time.sleep(0.5)  # the loading thread is gone; the engine process must not have gone with it
    assert remote.health() is None

    async def all_at_once():
        return await asyncio.gather(
            *(collect(remote, GenerationRequest(f"r{i}", p, GREEDY)) for i, p in enumerate(PROMPTS))
        )

    for i, (p, events) in enumerate(zip(PROMPTS, asyncio.run(all_at_once()))):
        want = local.generate_sync(GenerationRequest(f"l{i}", p, GREEDY))
        final = events[-1]
        assert (
            isinstance(final, FinalEvent)
            and final.finish_reason == "length"
            and final.error is None
        )
        assert final.token_ids == want.token_ids and final.text == want.text
        streamed = [t for ev in events[:-1] if isinstance(ev, TokenEvent) for t in ev.token_ids]
        assert streamed == final.token_ids and final.completion_tokens == 24
        t = final.timing
        assert (
            t.submitted_ns
            <= t.first_scheduled_ns
            <= t.first_token_ns
            <= t.finished_ns
            <= time.time_ns()
        )
        assert t.public_task_call_wall_ns == t.finished_ns - t.submitted_ns


def test_cancel_and_score_cross_the_process(tasks):
    remote, local = tasks
    long = SamplingParams(max_new_tokens=200, temperature=0, ignore_eos=True)

    async def cancel_after_first():
        n = 0
        async for ev in remote.generate(GenerationRequest("c1", [3, 4, 5], long)):
            if isinstance(ev, TokenEvent) and n == 0:
                remote.cancel("c1")
            n += 1
            if isinstance(ev, FinalEvent):
                return ev

    final = asyncio.run(cancel_after_first())
    assert final.finish_reason == "cancelled" and final.completion_tokens < 200
    assert (
        remote.generate_sync(GenerationRequest("after", [1, 2], GREEDY)).finish_reason == "length"
    )
    ids = [5, 6, 7, 8, 9]
    assert (remote.score(ids) - local.score(ids)).abs().max().item() == 0


def test_one_message_per_step():
    import multiprocessing

    from qualflow.runtime.api.events import TaskTiming
    from qualflow.runtime.engine.outputs import Final, Tokens
    from qualflow.runtime.process.core import Outbox
    from qualflow.runtime.process.messages import Finished, Step, recv

    rx, tx = multiprocessing.get_context("spawn").Pipe(duplex=False)
    out, timing = Outbox(tx), TaskTiming(submitted_ns=1, first_scheduled_ns=2, first_token_ns=3)
    sinks = [out.sink(k, timing) for k in range(3)]
    for s in sinks:
        s(Tokens([10]))
    timing.finished_ns = 4
    sinks[1](Final("length", None))
    out.flush()
    out.flush()  # nothing new: nothing sent
    assert recv(rx) == Step({0: [10], 1: [10], 2: [10]}, [Finished(1, "length", None, 2, 3, 4)])
    assert not rx.poll(0.1)
    rx.close()
    tx.close()


def test_killed_engine_process_fails_fast_and_close_leaves_nothing(bundle_dir):
    task = load_task(bundle_dir, EngineConfig(max_batch=2, max_context=256, engine_process="on"))
    pid = task.info["engine_pid"]
    try:
        assert task.health() is None

        async def killed_mid_stream():
            events = []
            async for ev in task.generate(
                GenerationRequest(
                    "k",
                    [1, 2, 3],
                    SamplingParams(max_new_tokens=200, temperature=0, ignore_eos=True),
                )
            ):
                if not events:
                    os.kill(pid, signal.SIGKILL)
                events.append(ev)
            return events

        t0 = time.monotonic()
        final = asyncio.run(asyncio.wait_for(killed_mid_stream(), 10))[-1]
        assert final.finish_reason == "error" and "killed by signal 9" in final.error
        assert time.monotonic() - t0 < 5 and final.timing.finished_ns >= final.timing.submitted_ns
        assert "killed by signal 9" in task.health()
        with pytest.raises(EngineFailed):
            asyncio.run(collect(task, GenerationRequest("late", [1], GREEDY)))
        assert task.generate_sync(GenerationRequest("late2", [1], GREEDY)).finish_reason == "error"
    finally:
        task.close()
    assert gone(pid)
    healthy = load_task(bundle_dir, EngineConfig(max_batch=2, max_context=256, engine_process="on"))
    pid = healthy.info["engine_pid"]
    healthy.close()
    assert gone(pid) and healthy.engine.proc.exitcode == 0


def test_thinking_through_the_engine_process(tasks):
    """Thinking with a budget: the forced close happens in the engine process, and the first answer
    token's stamp comes back with the final; the same tokens as in process."""
    from qualflow.runtime import Thinking

    remote, local = tasks
    prompt = local.render_prompt(None, [{"role": "user", "content": "Think"}], thinking=True)

    def req():
        return GenerationRequest(
            "think",
            prompt,
            local.default_params(max_new_tokens=9, temperature=0, ignore_eos=True),
            Thinking(5),
        )

    got, want = asyncio.run(collect(remote, req()))[-1], local.generate_sync(req())
    assert got.token_ids == want.token_ids and got.token_ids[3:6] == list(local.reasoning.close_ids)
    assert (got.reasoning_tokens, got.reasoning_text, got.text) == (
        5,
        want.reasoning_text,
        want.text,
    )
    assert got.timing.first_token_ns < got.timing.answer_first_token_ns <= got.timing.finished_ns


def test_the_engine_thread_reads_its_pipe_itself(bundle_dir):
    """process.core.PipeFeed: with nothing else reading the pipe, a Submit sent over it is run by
    the engine thread (its sink called there), a Cancel ends a request, and Stop shuts the loop
    down with every block free."""
    import multiprocessing

    from qualflow.runtime.api.request import GenerationRequest as Req
    from qualflow.runtime.process.core import Outbox, PipeFeed
    from qualflow.runtime.process.messages import Cancel, Step, Stop, Submit, recv, send

    task = load_task(bundle_dir, EngineConfig(max_batch=4, max_context=256))
    engine = task.engine
    ctx = multiprocessing.get_context("spawn")
    in_rx, in_tx = ctx.Pipe(duplex=False)
    out_rx, out_tx = ctx.Pipe(duplex=False)
    out, stopping, threads = Outbox(out_tx), threading.Event(), set()
    sink = out.sink
    out.sink = lambda key, timing: (
        lambda item: (threads.add(threading.current_thread()), sink(key, timing)(item))
    )
    engine.on_step = out.flush
    engine.attach_feed(PipeFeed(in_rx, engine, out, stopping))
    long = SamplingParams(max_new_tokens=200, temperature=0, ignore_eos=True)
    send(in_tx, Submit(0, Req("a", PROMPTS[0], GREEDY), time.time_ns()))
    send(in_tx, Submit(1, Req("b", PROMPTS[1], long), time.time_ns()))
    tokens, finals = {0: [], 1: []}, {}
    while 0 not in finals:
        step = recv(out_rx)
        assert isinstance(step, Step)
        for key, ids in step.tokens.items():
            tokens[key] += ids
        finals.update({f.key: f for f in step.finals})
    send(in_tx, Cancel("b"))
    while 1 not in finals:
        step = recv(out_rx)
        finals.update({f.key: f for f in step.finals})
    assert finals[0].reason == "length" and len(tokens[0]) == GREEDY.max_new_tokens
    assert finals[1].reason == "cancelled"
    assert threads == {engine.thread}
    send(in_tx, Stop())
    engine.thread.join(timeout=30)
    assert not engine.thread.is_alive() and stopping.is_set()
    assert engine.scheduler.blocks.num_free == engine.scheduler.blocks.capacity
    for c in (in_rx, in_tx, out_rx, out_tx):
        c.close()


def test_the_streaming_loop_reads_the_engine_pipe_and_gives_it_back(tasks):
    """process.reading: a stream's loop reads the engine's messages itself (on its own thread, no
    receiver-thread hop); once that loop is closed, a blocking call from elsewhere is read by the
    receiver thread again, and the next loop takes the pipe over."""
    remote, _ = tasks
    reading = remote.engine._reading
    handled_on, handle = [], reading.handle
    reading.handle = lambda msg: (handled_on.append(threading.current_thread().name), handle(msg))[
        1
    ]
    try:
        req = lambda i: GenerationRequest(f"loop-{i}", PROMPTS[i % 4], GREEDY)  # noqa: E731
        first = asyncio.run(collect(remote, req(0)))
        assert first[-1].finish_reason == "length"
        assert set(handled_on) == {"MainThread"}  # the loop's thread read every Step
        handled_on.clear()
        sync = remote.generate_sync(req(1))  # the loop above is closed: the thread reads
        assert sync.completion_tokens == GREEDY.max_new_tokens
        assert set(handled_on) == {"qualflow-engine-proxy"}
        handled_on.clear()
        again = asyncio.run(collect(remote, req(0)))  # a new loop takes it over
        # the same tokens (a loaded machine may hand a slow consumer two steps in one event)
        assert [t for e in again[:-1] for t in e.token_ids] == [
            t for e in first[:-1] for t in e.token_ids
        ]
        assert "MainThread" in handled_on
    finally:
        reading.handle = handle


def test_a_loop_that_ends_holding_the_pipe_gives_it_back_by_itself(tasks):
    """process.reading: once the loop that reads the engine's pipe is closed, the receiver thread
    reads again within its liveness interval, with nobody calling the link (the engine's Failed,
    say, is seen)."""
    from qualflow.runtime.process.reading import LIVENESS_INTERVAL_S

    remote, _ = tasks
    reading = remote.engine._reading

    async def go():
        await collect(remote, GenerationRequest("held", PROMPTS[2], GREEDY))
        assert (
            reading._state == "loop" and reading.on_loop_thread()
        )  # while this loop runs, it reads

    asyncio.run(go())
    deadline = time.monotonic() + 10 * LIVENESS_INTERVAL_S
    while reading._state != "thread" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reading._state == "thread"


def test_a_blocking_call_on_the_reading_loop_does_not_wait_on_itself(tasks):
    """process.reading: generate_sync and score made on the very loop that reads the engine's
    pipe (a blocking call inside a coroutine) hand the pipe back to the receiver thread instead
    of hanging."""
    remote, _ = tasks

    async def go():
        await collect(
            remote, GenerationRequest("first", PROMPTS[0], GREEDY)
        )  # this loop reads the pipe now
        assert remote.engine._reading.on_loop_thread()
        final = remote.generate_sync(GenerationRequest("sync-on-loop", PROMPTS[1], GREEDY))
        logits = remote.score(PROMPTS[3])
        return final, logits

    final, logits = asyncio.run(asyncio.wait_for(go(), timeout=60))
    assert final.completion_tokens == GREEDY.max_new_tokens and logits.shape[0] == len(PROMPTS[3])
