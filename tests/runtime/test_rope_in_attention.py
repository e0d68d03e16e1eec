"""q/k-norm + RoPE and the K/V store inside decode attention (`EngineConfig.rope_in_attention`,
kernels.paged_decode's `rope` form, PagedAttention.attend_qkv): the CPU decode step through the
family's fused path decodes as the separate q/k op did; the loader's choice; and, in Triton's
interpreter where triton is installed, the kernel's self-check (the kernel against the reference,
alone and in the engine's decode step: test_engine_kernel.py)."""

import asyncio
import textwrap

import torch

from qualflow.runtime import EngineConfig, GenerationRequest, load_task
from qualflow.runtime.engine.cuda_graphs import DecodeGraphs
from qualflow.runtime.engine.kernel_choice import rope_inside
from qualflow.runtime.kernels import fused

SELF_CHECK = textwrap.dedent("""
    import torch
    from qualflow.runtime.kernels import paged_decode as pd
    for dt in (torch.float32, torch.float16):
        assert pd.rope_self_check(torch.device("cpu"), dt, (16, 8, 128), 64) is None
    real = pd.reference_rope
    pd.reference_rope = lambda *a: real(*a) * 1.1   # a kernel that disagrees is caught
    assert "disagrees" in pd.rope_self_check(torch.device("cpu"), torch.float32, (4, 2, 32), 16)
    print("ok")
""")


def test_the_self_check_passes_and_catches_a_disagreement_interpreted(run_interpreted):
    run_interpreted(SELF_CHECK)


def _decode(task, reqs):
    async def together():
        async def one(r):
            return [ev async for ev in task.generate(r)][-1].token_ids

        return await asyncio.gather(*[one(r) for r in reqs])

    return asyncio.run(together())


def test_cpu_decode_step_takes_the_qkv_row_and_decodes_as_before(bundle_dir):
    """The graph path's decode step run eagerly on the CPU: the family hands the qkv row to the
    attention, whose reference does the q/k-norm + RoPE and the store; the output is the
    separate q/k op's token for token."""
    task = load_task(bundle_dir, EngineConfig(device="cpu", max_batch=3, max_context=64))

    def reqs():
        params = task.default_params(max_new_tokens=6, temperature=0.0, ignore_eos=True)
        return [GenerationRequest(f"g{i}", [11 + i] * (3 + 7 * i), params) for i in range(3)]

    try:
        assert isinstance(task.model.ops, fused.FusedOps)  # the family's fused path, reference ops
        alone = [task.generate_sync(r).token_ids for r in reqs()]
        runner, calls = task.engine.runner, []
        attn = runner.attn
        real = attn.attend_qkv
        attn.attend_qkv = lambda *a: calls.append(a[0]) or real(*a)
        with task.engine.lock:
            attn.rope_inside = True
            runner.graphs = DecodeGraphs(
                task.model, attn, 3, task._max_blocks, task.device, capture=False
            )
        assert _decode(task, reqs()) == alone
        layers = task.model.cfg.num_layers
        assert calls and set(calls) == set(range(layers)), calls
    finally:
        task.close()


def test_the_loader_asks_for_it_only_with_the_fused_triton_ops(bundle_dir):
    task = load_task(bundle_dir, EngineConfig(device="cpu", rope_in_attention=True))
    try:
        assert task.info["rope_in_attention"] is False  # no paged decode kernel on this CPU
        kv = task.engine.runner.attn
        on = EngineConfig(rope_in_attention=True)
        assert not rope_inside({}, kv, None, on, False)  # the compiled halves
        assert not rope_inside({}, kv, fused.FusedOps(use_triton=False), on, False)
        assert not rope_inside({}, kv, fused.FusedOps(use_triton=True), EngineConfig(), False)
    finally:
        task.close()


def test_the_reference_stores_the_new_kv_and_attends_as_the_separate_ops():
    from qualflow.runtime.kernels import paged_decode as pd
    from qualflow.runtime.kernels.destination import KvDestination
    from qualflow.runtime.kernels.reference import ref_qk_norm_rope

    g = torch.Generator().manual_seed(0)
    H, KV, D, BS = 4, 2, 16, 8
    pool = torch.randn(2, 6, BS, KV, D, generator=g)
    qkv = torch.randn(2, (H + 2 * KV) * D, generator=g)
    lens = torch.tensor([3, 11], dtype=torch.int32)
    tables = torch.tensor([[4, 0], [1, 5]], dtype=torch.int32)
    pos = (lens - 1).long()
    slots = torch.tensor([4 * BS + 2, 5 * BS + 2])
    ang = torch.rand(16, D, generator=g)
    rope = pd.QkRope(torch.rand(D), torch.rand(D), ang.cos(), ang.sin(), pos, slots, 1e-6)
    got = pool.clone()
    out = pd.reference(qkv, got[0], got[1], tables, lens, rope)
    want = pool.clone()
    dest = KvDestination(want[0].flatten(0, 1), want[1].flatten(0, 1), slots)
    q, k, v = ref_qk_norm_rope(
        qkv, rope.w_q, rope.w_k, ang.cos(), ang.sin(), pos, H, KV, 1e-6, dest
    )
    assert torch.equal(got, want) and not torch.equal(got, pool)
    assert torch.equal(out, pd.reference(q, want[0], want[1], tables, lens))
    assert torch.equal(got[0].flatten(0, 1)[slots], k)
