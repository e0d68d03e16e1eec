"""The synthetic engine (no model) on its own: one token per running request per step, up to the
batch (the rest wait, oldest first), each request to its max_new_tokens with finish reason
`length`, the timing stamped in order; a tick that runs late moves the clock (no token gap shorter
than a step); cancel and close end requests as `cancelled`."""

from __future__ import annotations

import queue
import threading
import time

import pytest

from qualflow.runtime import GenerationRequest, SamplingParams
from qualflow.runtime.engine.outputs import Final, Tokens
from qualflow.runtime.engine.synthetic import SyntheticEngine

pytestmark = pytest.mark.timeout(60)


def items(inbox: queue.SimpleQueue) -> list:
    out = []
    while not out or not isinstance(out[-1], Final):
        out.append(inbox.get(timeout=10))
    return out


def test_batch_bound_order_tokens_and_timing():
    eng = SyntheticEngine(0.005, 1, [7, 8])
    try:
        boxes = [queue.SimpleQueue(), queue.SimpleQueue()]
        seqs = [
            eng.submit(
                GenerationRequest(f"r{i}", [1, 2], SamplingParams(max_new_tokens=5)), boxes[i].put
            )
            for i in range(2)
        ]
        got = [items(b) for b in boxes]
        for seq, its in zip(seqs, got):
            assert [x.ids for x in its[:-1]] == [[7], [8], [7], [8], [7]] and its[-1] == Final(
                "length"
            )
            assert seq.done and seq.out == [7, 8, 7, 8, 7]
            t = seq.timing
            assert t.submitted_ns <= t.first_scheduled_ns <= t.first_token_ns <= t.finished_ns
            assert t.decode_ns >= 4 * 0.005e9 * 0.9  # one token a step, never a burst
        # a batch of one: the second request waits until the first has ended
        assert seqs[1].timing.first_scheduled_ns >= seqs[0].timing.finished_ns
    finally:
        eng.close()
    assert not eng.thread.is_alive() and eng.health() is not None  # closed: it serves no more


STEP_S, LATE_S = 0.02, 0.012


class OversleepsOnce(threading.Event):
    """An event whose second wait returns LATE_S late: a busy machine's late wake-up."""

    def __init__(self):
        super().__init__()
        self.waits = 0

    def wait(self, timeout=None):
        self.waits += 1
        got = super().wait(timeout)
        if self.waits == 2:
            time.sleep(LATE_S)
        return got


class LateWake(SyntheticEngine):
    def _loop(self):
        self._stop = OversleepsOnce()  # the step clock's waits (close() sets this one)
        super()._loop()


def test_a_late_tick_moves_the_clock_instead_of_shortening_the_next_gap():
    """A tick LATE_S late, then the next: a clock that kept its schedule would give that gap
    STEP_S - LATE_S (8 ms); the engine's next tick comes a full step after the late one."""
    eng = LateWake(STEP_S, 1, [7])
    try:
        stamps = []
        eng.submit(
            GenerationRequest("r", [1], SamplingParams(max_new_tokens=4)),
            lambda item: stamps.append(time.monotonic()) if isinstance(item, Tokens) else None,
        )
        deadline = time.monotonic() + 10
        while len(stamps) < 4 and time.monotonic() < deadline:
            time.sleep(0.005)
        gaps = [b - a for a, b in zip(stamps, stamps[1:])]
        assert len(gaps) == 3 and min(gaps) >= 0.75 * STEP_S, gaps
    finally:
        eng.close()


def test_cancel_and_close_end_requests_as_cancelled():
    eng = SyntheticEngine(0.005, 1, [7])
    a, b = queue.SimpleQueue(), queue.SimpleQueue()
    eng.submit(GenerationRequest("a", [1], SamplingParams(max_new_tokens=10_000)), a.put)
    sb = eng.submit(GenerationRequest("b", [1], SamplingParams(max_new_tokens=10_000)), b.put)
    assert isinstance(a.get(timeout=10), Tokens)
    eng.cancel("a")
    assert items(a)[-1] == Final("cancelled")
    assert isinstance(b.get(timeout=10), Tokens) and eng.health() is None
    eng.close()
    assert items(b)[-1] == Final("cancelled") and sb.done


def test_thinking_gets_its_close_forced_at_the_budget():
    from qualflow.runtime import Thinking
    from qualflow.runtime.engine.thinking import ThinkTokens

    eng = SyntheticEngine(0.001, 1, [7], ThinkTokens(9, (8, 9, 10)))
    try:
        box = queue.SimpleQueue()
        seq = eng.submit(
            GenerationRequest("t", [1], SamplingParams(max_new_tokens=6), Thinking(4)), box.put
        )
        assert items(box)[-1] == Final("length")
        assert seq.out == [7, 7, 8, 9, 10, 7]  # the end-think token is the budget's last
        assert (
            seq.timing.first_token_ns < seq.timing.answer_first_token_ns <= seq.timing.finished_ns
        )
    finally:
        eng.close()
