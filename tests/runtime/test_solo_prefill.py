"""A fresh prefill step of one sequence through torch's dense causal SDPA
(`EngineConfig.solo_prefill_attention`: cuDNN's kernel on a Hopper GPU, checked at load; torch's
default backend here, the reference): the dense path equals the varlen reference, the load-time
choice, and in the padded prefill steps (run eagerly here, captured as graphs of their own on
cuda) a lone prompt takes it while a step of several does not, with greedy output equal to the
engine without padded steps."""

from __future__ import annotations

import asyncio

import torch

from qualflow.runtime import EngineConfig, GenerationRequest, SamplingParams, load_task
from qualflow.runtime.kernels.attention import PagedAttention, dense_causal, varlen_sdpa
from qualflow.runtime.kernels.varlen_choice import choose_solo

PROMPTS = [[1, 2, 3], [7] * 17, list(range(30, 70)), [99, 5, 8, 13, 21]]


def test_the_dense_path_equals_the_varlen_reference_with_grouped_kv():
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(37, 4, 16, generator=g), *torch.randn(2, 37, 2, 16, generator=g)
    ref = varlen_sdpa(q, k, v, [37], [37])
    assert torch.allclose(dense_causal(q, k, v, cudnn=False), ref, atol=1e-5)
    # rows after the prompt (a padded step's filler) change nothing before them
    pad = torch.randn(11, 4, 16, generator=g), *torch.randn(2, 11, 2, 16, generator=g)
    out = dense_causal(*(torch.cat([a, b]) for a, b in zip((q, k, v), pad)), cudnn=False)
    assert torch.allclose(out[:37], ref, atol=1e-5)


def test_the_choice_off_cuda_is_the_reference_and_varlen_asks_for_nothing():
    attn = PagedAttention(torch.zeros(1, 2, 4, 16, 2, 16), 16, use_flash=False)
    assert choose_solo(attn, 4, torch.device("cpu"), torch.float32, "cudnn") == "dense-sdpa"
    assert attn.solo == "sdpa"
    assert choose_solo(attn, 4, torch.device("cpu"), torch.float32, "varlen") == "varlen"
    assert attn.solo == ""


def _generate(task, together: bool) -> list[list[int]]:
    async def one(i, p):
        params = SamplingParams(max_new_tokens=6, temperature=0, ignore_eos=True)
        return [ev async for ev in task.generate(GenerationRequest(f"r{i}", p, params))][-1]

    async def go():
        if not together:  # one after another: every prefill step holds one prompt
            return [(await one(i, p)).token_ids for i, p in enumerate(PROMPTS)]
        runs = [asyncio.ensure_future(one(i, p)) for i, p in enumerate(PROMPTS)]
        with task.engine.lock:  # the prompts queue up behind the first step
            await asyncio.sleep(0.05)
        return [f.token_ids for f in await asyncio.gather(*runs)]

    return asyncio.run(go())


def _steps(task) -> list[tuple[int, bool]]:
    """(prompts, dense) of each padded fresh prefill step."""
    graphs, seen = task.engine.runner.prefill, []
    prefill, run = graphs.prefill, graphs._run

    def spy_prefill(batch, *a):
        seen.append([len(batch.seqs)])
        return prefill(batch, *a)

    def spy_run(t, lens, dense=False):
        seen[-1].append(dense)
        return run(t, lens, dense)

    graphs.prefill, graphs._run = spy_prefill, spy_run
    return seen


def test_a_lone_prompt_takes_the_dense_path_and_decodes_as_before(bundle_dir):
    # no prefix cache: the second round's prompts are fresh steps again
    cfg = dict(max_batch=4, max_context=96, async_scheduling="on", prefix_caching=False)
    plain = load_task(bundle_dir, EngineConfig(**cfg, prefill_graphs="off"))
    try:
        expected = _generate(plain, together=False)
    finally:
        plain.close()
    task = load_task(
        bundle_dir, EngineConfig(**cfg, prefill_graphs="on", solo_prefill_attention="cudnn")
    )
    try:
        assert task.info["solo_prefill_attention"] == "dense-sdpa"
        assert task.info["solo_prefill_graphs"] == "eager"
        seen = _steps(task)
        assert _generate(task, together=False) == expected
        assert seen == [[1, True]] * len(PROMPTS)  # a lone prompt's step: dense
        seen.clear()
        assert _generate(task, together=True) == expected
        assert any(n > 1 for n, _ in seen)  # some step held several prompts
        assert all(dense == (n == 1) for n, dense in seen)  # those, and only those, varlen
    finally:
        task.close()
