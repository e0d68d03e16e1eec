"""The engine and the Task API on the embedded default bundle (CPU)."""

from __future__ import annotations

import asyncio
import time

import pytest

from qualflow.runtime import (
    CapabilityMissing,
    EngineConfig,
    FinalEvent,
    GenerationRequest,
    InvalidRequest,
    PromptTooLong,
    TokenEvent,
    load_task,
)
from qualflow.runtime.frontend.detok import IncrementalDecoder


@pytest.fixture(scope="module")
def task(bundle_dir):
    t = load_task(bundle_dir, EngineConfig(device="cpu", max_batch=4))
    yield t
    t.close()


def greedy(task, n, **kw):
    return task.default_params(max_new_tokens=n, temperature=0.0, **kw)


def prompt(task, text):
    return task.render_prompt(None, [{"role": "user", "content": text}])


async def collect(task, req):
    events = []
    async for ev in task.generate(req):
        events.append((time.time_ns(), ev))
    return events


def test_batched_equals_alone(task):
    texts = [
        "Hi",
        "Tell me about the sea in many words please",
        "1 2 3",
        "¿Qué tal? 🐍",
        "x" * 40,
        "ok",
    ]
    reqs = [
        GenerationRequest(f"b{i}", prompt(task, t), greedy(task, 5 + 3 * i, ignore_eos=True))
        for i, t in enumerate(texts)
    ]
    alone = [task.generate_sync(r).token_ids for r in reqs]

    async def together():  # 6 requests over 4 slots: joins and leaves at step boundaries
        return await asyncio.gather(*[collect(task, r) for r in reqs])

    batched = [evs[-1][1].token_ids for evs in asyncio.run(together())]
    assert batched == alone
    assert [len(t) for t in alone] == [5 + 3 * i for i in range(6)]


def test_incremental_delivery_counts_and_timing(task):
    req = GenerationRequest("inc", prompt(task, "Count"), greedy(task, 12, ignore_eos=True))
    events = asyncio.run(collect(task, req))
    toks = [e for _, e in events if isinstance(e, TokenEvent)]
    final = events[-1][1]
    assert isinstance(final, FinalEvent) and final.finish_reason == "length"
    assert (
        events[0][0] < final.timing.finished_ns
    )  # the first token arrived before the request finished
    assert (
        sum(len(e.token_ids) for e in toks) == final.completion_tokens == 12 == len(final.token_ids)
    )
    assert final.prompt_tokens == len(req.prompt_token_ids)
    assert "".join(e.text for e in toks) + final.tail_text == final.text
    t = final.timing
    assert t.submitted_ns <= t.first_scheduled_ns <= t.first_token_ns <= t.finished_ns
    assert t.public_task_call_wall_ns == t.finished_ns - t.submitted_ns
    assert t.queue_wait_ns + t.prefill_ns + t.decode_ns == t.public_task_call_wall_ns


def test_cancellation_frees_slot_and_others_continue(bundle_dir):
    task = load_task(bundle_dir, EngineConfig(device="cpu", max_batch=2, step_delay_s=0.01))
    try:

        async def scenario():
            keep = asyncio.create_task(
                collect(
                    task,
                    GenerationRequest("keep", prompt(task, "a"), greedy(task, 30, ignore_eos=True)),
                )
            )
            gen = task.generate(
                GenerationRequest("drop", prompt(task, "b"), greedy(task, 500, ignore_eos=True))
            )
            first = await gen.__anext__()  # running now
            assert isinstance(first, TokenEvent)
            task.cancel("drop")
            rest = [ev async for ev in gen]
            # the freed slot takes a new request while "keep" is still running
            third = await collect(
                task,
                GenerationRequest("third", prompt(task, "c"), greedy(task, 3, ignore_eos=True)),
            )
            return rest[-1], await keep, third

        dropped, kept, third = asyncio.run(scenario())
        assert dropped.finish_reason == "cancelled" and dropped.completion_tokens < 500
        assert kept[-1][1].finish_reason == "length" and kept[-1][1].completion_tokens == 30
        assert third[-1][1].finish_reason == "length"
        assert third[-1][1].timing.finished_ns < kept[-1][1].timing.finished_ns
        assert not task.engine.running
    finally:
        task.close()


def test_closing_the_stream_cancels(bundle_dir):
    task = load_task(bundle_dir, EngineConfig(device="cpu", max_batch=1, step_delay_s=0.005))
    try:

        async def scenario():
            gen = task.generate(
                GenerationRequest("gone", prompt(task, "x"), greedy(task, 1000, ignore_eos=True))
            )
            await gen.__anext__()
            await gen.aclose()  # e.g. the HTTP client disconnected
            return await collect(
                task, GenerationRequest("next", prompt(task, "y"), greedy(task, 2))
            )

        nxt = asyncio.run(scenario())
        assert nxt[-1][1].finish_reason in ("length", "stop")
    finally:
        task.close()


def test_fifo_queue_under_full_batch(bundle_dir):
    task = load_task(bundle_dir, EngineConfig(device="cpu", max_batch=1, step_delay_s=0.002))
    try:

        async def scenario():
            reqs = [
                GenerationRequest(f"q{i}", prompt(task, str(i)), greedy(task, 6, ignore_eos=True))
                for i in range(4)
            ]
            return await asyncio.gather(*[collect(task, r) for r in reqs])

        finals = [evs[-1][1] for evs in asyncio.run(scenario())]
        starts = [f.timing.first_scheduled_ns for f in finals]
        assert starts == sorted(starts)  # served in submission order
        for a, b in zip(finals, finals[1:]):
            assert (
                b.timing.first_scheduled_ns >= a.timing.finished_ns
            )  # one slot: waits for the previous
        assert finals[-1].timing.queue_wait_ns > finals[0].timing.queue_wait_ns
    finally:
        task.close()


def test_error_isolation(bundle_dir, monkeypatch):
    task = load_task(bundle_dir, EngineConfig(device="cpu", max_batch=4))
    try:
        real = task.model.forward
        calls = {"n": 0}

        def flaky(*a, **kw):
            calls["n"] += 1
            if calls["n"] == 3:
                raise RuntimeError("injected fault")
            return real(*a, **kw)

        monkeypatch.setattr(task.model, "forward", flaky)
        r1 = task.generate_sync(
            GenerationRequest("e1", prompt(task, "a"), greedy(task, 8, ignore_eos=True))
        )
        assert r1.finish_reason == "error" and "injected fault" in r1.error
        r2 = task.generate_sync(
            GenerationRequest("e2", prompt(task, "a"), greedy(task, 8, ignore_eos=True))
        )
        assert r2.finish_reason == "length" and r2.completion_tokens == 8
    finally:
        task.close()


def test_validation_before_queueing(task):
    ids = prompt(task, "hi")
    bad = [
        dict(temperature=-1),
        dict(temperature=3),
        dict(top_p=0),
        dict(top_k=-2),
        dict(max_new_tokens=0),
        dict(max_new_tokens=2, min_tokens=3),
    ]
    for kw in bad:
        with pytest.raises(InvalidRequest) as e:
            task.validate(
                GenerationRequest("v", ids, task.default_params(**{"max_new_tokens": 4, **kw}))
            )
        assert e.value.param in kw
    with pytest.raises(PromptTooLong):
        task.validate(GenerationRequest("v", [1] * task.context_limit, greedy(task, 1)))
    with pytest.raises(InvalidRequest):
        task.validate(GenerationRequest("v", [task.vocab_size], greedy(task, 1)))
    with pytest.raises(CapabilityMissing):
        task.require("image-generation")
    assert not task.engine.waiting and not task.engine.running


def test_sampling_seeded_and_stop_tokens(task):
    ids = prompt(task, "Pick words")
    p = task.default_params(
        max_new_tokens=10, temperature=1.0, top_p=0.9, top_k=50, seed=7, ignore_eos=True
    )
    a = task.generate_sync(GenerationRequest("s1", ids, p)).token_ids
    b = task.generate_sync(GenerationRequest("s2", ids, p)).token_ids
    assert a == b
    k1 = task.default_params(max_new_tokens=10, temperature=1.0, top_k=1, seed=3, ignore_eos=True)
    assert (
        task.generate_sync(GenerationRequest("s3", ids, k1)).token_ids
        == task.generate_sync(
            GenerationRequest("s4", ids, greedy(task, 10, ignore_eos=True))
        ).token_ids
    )
    # a stop token ends the request: make the greedy first token a stop token
    first = task.generate_sync(GenerationRequest("s5", ids, greedy(task, 1))).token_ids[0]
    r = task.generate_sync(GenerationRequest("s6", ids, greedy(task, 10, stop_token_ids=(first,))))
    assert r.finish_reason == "stop" and r.completion_tokens == 1
    r = task.generate_sync(
        GenerationRequest("s7", ids, greedy(task, 10, stop_token_ids=(first,), min_tokens=4))
    )
    assert r.completion_tokens >= 4 and first not in r.token_ids[:3]


def test_incremental_decoder_never_splits_characters(task):
    tok = task.tokenizer
    text = "añ 🐍🙂 長城 ok"
    ids = tok.encode(text, add_special_tokens=False).ids
    dec = IncrementalDecoder(tok)
    parts = [dec.push([i]) for i in ids] + [dec.flush()]
    assert "".join(parts) == text
    assert all("\ufffd" not in p for p in parts)


def test_a_max_context_above_the_models_limit_is_said(bundle_dir, caplog):
    """Capped at the model's limit, and logged as such (the default, a cap by design, is not)."""
    assert (
        EngineConfig().context_capped(2048) is None
        and EngineConfig(max_context=1024).context_capped(2048) is None
    )
    with caplog.at_level("WARNING", logger="qualflow.runtime"):
        t = load_task(
            bundle_dir, EngineConfig(device="cpu", engine_kind="synthetic", max_context=999999)
        )
    t.close()
    assert t.context_limit == 3072
    assert (
        "--max-context 999999 is above the model's context limit of 3072 tokens: requests are "
        "bounded at 3072" in caplog.text
    )
