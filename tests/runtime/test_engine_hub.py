"""One engine process shared by two API-side links (runtime EngineHost, process.core_hub; what
`qualflow serve --api-server-count 2` runs), at the Task level on CPU with the embedded model:
each link gets its own requests' tokens and finals only (the same greedy output on either link,
the counts exact), a link that detaches ends its own open requests as cancelled while the other
link's go on, and a killed engine process fails the open requests of every link and turns their
health() unhealthy."""

from __future__ import annotations

import os
import queue
import signal
import time

import pytest

from qualflow.runtime import EngineConfig, EngineHost, GenerationRequest, SamplingParams, Task
from qualflow.runtime.engine.outputs import Final, Tokens
from qualflow.runtime.task import load_task

pytestmark = pytest.mark.timeout(120)
CFG = EngineConfig(max_batch=4, max_context=256, step_delay_s=0.01)
PROMPTS = [[1, 2, 3, 4, 5], [7] * 17, [99, 5]]


def greedy(n: int) -> SamplingParams:
    return SamplingParams(max_new_tokens=n, temperature=0, ignore_eos=True)


@pytest.fixture(scope="module")
def hub(bundle_dir):
    host = EngineHost(load_task, bundle_dir, CFG, 2)
    a, b = (
        Task.attached(bundle_dir, CFG, link) for link in host.links
    )  # both links in this process
    yield host, a, b
    for t in (a, b):
        t.close()
    host.stop(timeout_s=20)


def open_request(task: Task, rid: str, prompt: list[int], n: int) -> queue.SimpleQueue:
    """The engine items of one request, as they come."""
    items: queue.SimpleQueue = queue.SimpleQueue()
    task.engine.submit(GenerationRequest(rid, prompt, greedy(n)), items.put)
    return items


def drain(items: queue.SimpleQueue, timeout_s: float = 30) -> tuple[list[int], Final]:
    ids = []
    while True:
        item = items.get(timeout=timeout_s)
        if isinstance(item, Tokens):
            ids += item.ids
        else:
            return ids, item


def test_each_link_gets_only_its_own_requests(hub):
    host, a, b = hub
    assert a.info["engine_pid"] == b.info["engine_pid"] == host.pid != os.getpid()
    # the same prompts on both links at once: every request's tokens reach its own link only
    opened = [
        (open_request(t, f"{name}-{i}", p, 12 + i), 12 + i)
        for i, p in enumerate(PROMPTS)
        for name, t in (("a", a), ("b", b))
    ]
    results = [(drain(q), n) for q, n in opened]
    for (ids, final), n in results:
        assert final.reason == "length" and len(ids) == n
    for i in range(len(PROMPTS)):  # greedy: the same tokens for one prompt, whichever link asked
        assert results[2 * i][0][0] == results[2 * i + 1][0][0]
    assert results[0][0][0] != results[2][0][0]
    assert a.health() is None and b.health() is None


def test_a_detached_link_cancels_only_its_own(bundle_dir, hub):
    host, a, b = hub
    mine, theirs = (
        open_request(a, "a-long", PROMPTS[0], 200),
        open_request(b, "b-long", PROMPTS[0], 40),
    )
    first = mine.get(timeout=30)
    assert isinstance(first, Tokens)
    a.close()  # Stop on a's link: its open request ends cancelled at once
    ids, final = drain(mine)
    assert final.reason == "cancelled" and len(ids) < 200
    ids, final = drain(theirs)
    assert final.reason == "length" and len(ids) == 40
    assert b.health() is None and host.proc.is_alive()


def test_a_killed_engine_fails_every_link(hub):
    host, a, b = hub
    items = open_request(b, "b-open", PROMPTS[1], 200)
    assert isinstance(items.get(timeout=30), Tokens)
    os.kill(host.pid, signal.SIGKILL)
    ids, final = drain(items, timeout_s=10)
    assert final.reason == "error" and "engine process" in final.error and len(ids) < 200
    deadline = time.monotonic() + 5
    while b.health() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert f"pid {host.pid}" in (b.health() or "")
    late = open_request(b, "b-late", PROMPTS[0], 4)
    assert drain(late, timeout_s=5)[1].reason == "error"
    host.proc.join(timeout=5)
    assert host.proc.exitcode == -signal.SIGKILL
    t0 = time.monotonic()
    b.close()  # closing a link to a dead engine does not wait for it
    assert time.monotonic() - t0 < 2


def test_the_engine_thread_reads_every_link_and_closes_after_the_last():
    """process.core_hub.Hub.feed: the engine thread (here the synthetic engine's, in this
    process) reads the links itself; each gets its own request's tokens; Stop from one detaches
    it (answered Closed) while the engine goes on, and the last one's Stop ends the engine
    thread."""
    import multiprocessing
    import threading

    from qualflow.runtime.engine.synthetic import SyntheticEngine
    from qualflow.runtime.process.core_hub import Hub, Link
    from qualflow.runtime.process.messages import Closed, EngineEnds, Step, Stop, Submit, recv, send

    ctx = multiprocessing.get_context("spawn")
    api = []
    links = []
    for _ in range(2):
        from_api, to_engine = ctx.Pipe(duplex=False)
        from_engine, to_api = ctx.Pipe(duplex=False)
        links.append(Link(EngineEnds(from_api, to_api)))
        api.append((to_engine, from_engine))
    engine = SyntheticEngine(0.002, 4, [11, 12])
    stopping = threading.Event()
    hub = Hub(engine, links, stopping)
    engine.on_step = hub.flush
    engine.attach_feed(hub.feed)
    for i, (to_engine, _) in enumerate(api):
        send(
            to_engine, Submit(i, GenerationRequest(f"r{i}", [1, 2], greedy(3 + i)), time.time_ns())
        )
    for i, (_, from_engine) in enumerate(api):
        got, finals = [], []
        while not finals:
            step = recv(from_engine)
            assert isinstance(step, Step) and set(step.tokens) <= {i}
            got += step.tokens.get(i, [])
            finals += step.finals
        assert len(got) == 3 + i and finals[0].reason == "length"
    send(api[0][0], Stop())
    while not isinstance(recv(api[0][1]), Closed):
        pass
    assert engine.thread.is_alive() and not stopping.is_set()
    send(api[1][0], Stop())
    engine.thread.join(timeout=10)
    assert not engine.thread.is_alive() and stopping.is_set()
