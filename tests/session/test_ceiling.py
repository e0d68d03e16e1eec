"""The harness ceiling's engine: the stack's settings on the synthetic engine, with a batch that
never queues a ceiling point's requests."""

from qualflow.aiperf.command import AiperfPoint
from qualflow.runtime.config import EngineConfig
from qualflow.session.ceiling import ceiling_engine


def _point(pid, concurrency, **kw):
    return AiperfPoint(
        point_id=pid, concurrency=concurrency, isl=128, osl=128, request_count=512, **kw
    )


def test_the_ceiling_batch_holds_the_largest_point_in_flight():
    stack = EngineConfig(device="cuda", max_batch=64, max_context=512)
    eng = ceiling_engine(stack, 1.0, [_point("c64", 64), _point("c256", 256)])
    assert eng.max_batch == 256 and eng.engine_kind == "synthetic" and eng.step_ms == 1.0
    assert eng.device == "cpu" and eng.max_context == 512  # the stack's context limit stays


def test_the_stack_batch_stays_when_it_is_larger_and_open_loop_points_count_their_requests():
    stack = EngineConfig(max_batch=8)
    assert ceiling_engine(stack, 2.0, [_point("c1", 1)]).max_batch == 8
    assert ceiling_engine(stack, 2.0).max_batch == 8
    rate = _point("r5", None, request_rate=5.0, warmup_request_count=4)
    assert ceiling_engine(stack, 2.0, [rate]).max_batch == 512
