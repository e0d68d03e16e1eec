"""Thinking on (capability `reasoning`) on the embedded model (CPU): the engine forces the
family's closing tokens at the budget, in both scheduling modes, with the same tokens; reasoning
and answer are split and counted on the caller's side; truncation inside the think block; a
request without thinking is untouched by a thinking one beside it. The engine process:
tests/runtime/test_engine_process.py."""

from __future__ import annotations

import asyncio
import os

import pytest

from qualflow.families import get_family
from qualflow.runtime import (
    REASONING,
    EngineConfig,
    FinalEvent,
    GenerationRequest,
    Thinking,
    TokenEvent,
    load_task,
)
from qualflow.runtime.engine.thinking import ThinkState, ThinkTokens
from qualflow.runtime.frontend.reasoning import ThinkSplit

pytestmark = pytest.mark.timeout(300)
SPEC = get_family("qwen3").reasoning
CLOSE = SPEC.close_ids  # "\n</think>\n\n"


def test_think_state_forces_the_close_so_the_budget_ends_at_the_end_token():
    st = ThinkState.of(ThinkTokens(SPEC.end_id, CLOSE), budget=5)
    assert [st.forced(p) for p in range(7)] == [None, None, None, 198, SPEC.end_id, 271, None]
    st = ThinkState.of(ThinkTokens(SPEC.end_id, CLOSE), budget=5)
    assert not st.read(0, 11) and st.read(0, 11) is False and st.closed_at is None
    assert not st.read(1, SPEC.end_id) and st.closed_at == 1  # the model closed the block itself
    assert st.read(2, 7) and st.settled  # the first answer token
    assert [st.forced(p) for p in range(7)] == [None] * 7  # ... so nothing is forced
    assert ThinkState.of(ThinkTokens(SPEC.end_id, CLOSE), None).forced(10**6) is None  # unbounded


def test_think_state_waits_for_the_token_before_the_forcing_decision():
    st = ThinkState.of(
        ThinkTokens(SPEC.end_id, CLOSE), budget=6
    )  # forcing would start at position 4
    assert [st.must_wait(p) for p in (3, 4, 5)] == [False, True, False]
    st.read(3, SPEC.end_id)
    assert not st.must_wait(4) and st.forced(4) is None


def test_think_split_separates_reasoning_and_answer(tasks):
    tok = tasks["off"].tokenizer
    ids = tok.encode("Let me think.\n</think>\n\nHello there", add_special_tokens=False).ids
    split = ThinkSplit(tok, SPEC.end_id)
    parts = [split.push([i]) for i in ids] + [split.flush()]
    assert "".join(r for r, _ in parts) == split.reasoning_text == "Let me think.\n"
    assert (
        "".join(a for _, a in parts) == split.answer_text == "Hello there"
    )  # the blank line is not the answer's
    assert split.reasoning_tokens == ids.index(SPEC.end_id) + 1 and not split.open


@pytest.fixture(scope="module")
def tasks(bundle_dir):
    """Both scheduling modes; QUALFLOW_TEST_DEVICE=cuda runs them on a GPU (CUDA graphs, compiled
    ops)."""
    device = os.environ.get("QUALFLOW_TEST_DEVICE", "cpu")
    loaded = {
        mode: load_task(
            bundle_dir,
            EngineConfig(
                device=device,
                max_batch=4,
                max_context=128,
                async_scheduling=mode,
                engine_process="off",
            ),
        )
        for mode in ("off", "on")
    }
    yield loaded
    for t in loaded.values():
        t.close()


def run_all(task, reqs):
    async def one(r):
        return [e async for e in task.generate(r)]

    async def go():
        return await asyncio.gather(*(one(r) for r in reqs))

    return asyncio.run(go())


def requests(task):
    prompt = task.render_prompt(None, [{"role": "user", "content": "Think first"}], thinking=True)
    plain = task.render_prompt(None, [{"role": "user", "content": "Think first"}])
    greedy = lambda n: task.default_params(max_new_tokens=n, temperature=0, ignore_eos=True)  # noqa: E731
    return [
        GenerationRequest("budget", prompt, greedy(10), Thinking(4)),
        GenerationRequest(
            "cut", prompt, greedy(3), Thinking(8)
        ),  # max_output_tokens inside reasoning
        GenerationRequest("unbounded", prompt, greedy(6), Thinking(None)),
        GenerationRequest("off", plain, greedy(6)),
    ]


def test_budget_forces_the_close_in_both_scheduling_modes(tasks):
    assert REASONING in tasks["off"].capabilities
    assert tasks["off"].render_prompt(None, [{"role": "user", "content": "x"}], thinking=True)[
        -2:
    ] == list(SPEC.open_ids)
    results = {}
    for mode, task in tasks.items():
        evs = run_all(task, requests(task))
        results[mode] = [
            (e[-1].token_ids, e[-1].reasoning_tokens, e[-1].finish_reason) for e in evs
        ]
        budget, cut, unbounded, off = (e[-1] for e in evs)
        assert (
            budget.token_ids[2:5] == list(CLOSE)
            and budget.reasoning_tokens == 4
            and budget.reasoning_closed
        )
        assert (
            budget.timing.first_token_ns
            <= budget.timing.answer_first_token_ns
            <= budget.timing.finished_ns
        )
        assert "</think>" not in budget.reasoning_text + budget.text and budget.text
        streamed = [e for e in evs[0][:-1] if isinstance(e, TokenEvent)]
        assert (
            "".join(e.reasoning_text for e in streamed) + budget.reasoning_tail
            == budget.reasoning_text
        )
        assert "".join(e.text for e in streamed) + budget.tail_text == budget.text
        # `reasoning`: the think block is still open after the event. The first event is reasoning,
        # unless a slow consumer got the tokens across the close in one event (seen on a loaded
        # 2-core machine): then it holds reasoning text and the forced close (the answer's text may
        # still be empty: its leading newlines are the close's)
        first = streamed[0]
        crossed = first.token_ids[-len(CLOSE) :] == list(CLOSE) or first.text
        assert streamed[-1].reasoning is False
        assert first.reasoning is True or (first.reasoning_text and crossed), first
        assert (cut.finish_reason, cut.reasoning_tokens, cut.completion_tokens, cut.text) == (
            "length",
            3,
            3,
            "",
        )
        assert not cut.reasoning_closed and cut.timing.answer_first_token_ns is None
        assert SPEC.end_id not in unbounded.token_ids and unbounded.reasoning_tokens == 6
        assert off.reasoning_text is None and off.timing.answer_first_token_ns is None
        assert (
            off.token_ids == task.generate_sync(requests(task)[3]).token_ids
        )  # untouched by its neighbours
        assert not task.engine.think.open and not task.engine.scheduler.held
    assert results["on"] == results["off"]


def test_a_close_by_the_model_just_before_the_budget_is_not_forced_again(tasks):
    """The model's own end-think token right before the forcing position: with overlapped scheduling
    the forcing decision waits for it, so nothing is forced and the output is the model's."""
    for task in tasks.values():
        prompt = task.render_prompt(
            None, [{"role": "user", "content": "Think first"}], thinking=True
        )
        params = task.default_params(max_new_tokens=8, temperature=0, ignore_eos=True)
        model = task.generate_sync(GenerationRequest("model", prompt, params)).token_ids
        k = next(i for i in range(2, 8) if model[i] not in model[:i])
        engine, saved = task.engine, task.engine.think.tokens
        engine.think.tokens = ThinkTokens(
            model[k], (model[k] + 1, model[k], model[k] + 2)
        )  # its own token ends the block
        try:
            final = task.generate_sync(GenerationRequest("own", prompt, params, Thinking(k + 3)))
        finally:
            engine.think_tokens = saved
        assert isinstance(final, FinalEvent) and final.token_ids == model
        assert final.timing.answer_first_token_ns is not None


def test_thinking_is_validated(tasks):
    task = tasks["off"]
    prompt = task.render_prompt(None, [{"role": "user", "content": "x"}], thinking=True)
    from qualflow.runtime import InvalidRequest

    with pytest.raises(InvalidRequest) as e:
        task.validate(
            GenerationRequest("small", prompt, task.default_params(max_new_tokens=4), Thinking(1))
        )
    assert e.value.param == "reasoning"
