"""q/k-norm + RoPE and the K/V store inside decode attention (`EngineConfig.rope_in_attention`,
kernels.paged_decode's `rope` form, PagedAttention.attend_qkv): the CPU decode step through the
family's fused path decodes as the separate q/k op did; the loader's choice; and, in Triton's
interpreter where triton is installed, the kernel against the unfused reference (never reading the
pool's slot of the query's own position), its self-check, and the engine's greedy output with the
kernel on every decode step."""

import asyncio
import textwrap

import torch

from qualflow.runtime import EngineConfig, GenerationRequest, load_task
from qualflow.runtime.engine.cuda_graphs import DecodeGraphs
from qualflow.runtime.engine.kernel_choice import rope_inside
from qualflow.runtime.kernels import fused

KERNEL = textwrap.dedent("""
    import torch
    from qualflow.runtime.kernels import paged_decode as pd
    g = torch.Generator().manual_seed(1)
    shapes = [(3, 4, 2, 32, 16, 1), (3, 4, 2, 32, 16, 4), (2, 16, 8, 64, 16, 2),
              (3, 4, 2, 32, 16, 16)]   # the last: more splits than a short context has blocks
    for B, H, KV, D, BS, splits in shapes:
        nb, M = 40, 8
        kc0, vc0 = torch.randn(nb, BS, KV, D, generator=g), torch.randn(nb, BS, KV, D, generator=g)
        qkv = torch.randn(B, (H + 2 * KV) * D, generator=g) * 3
        lens = torch.tensor([1, 37, 80][:B], dtype=torch.int32)
        perm = torch.randperm(nb - 1, generator=g) + 1
        bt = torch.stack([perm[b * M:(b + 1) * M] for b in range(B)]).to(torch.int32)
        pos = (lens - 1).long()
        slots = torch.stack([bt[b, pos[b] // BS].long() * BS + pos[b] % BS for b in range(B)])
        ang = torch.rand(128, D, generator=g) * 6.28
        wq, wk = torch.randn(D, generator=g), torch.randn(D, generator=g)
        rope = pd.QkRope(wq, wk, ang.cos(), ang.sin(), pos, slots, 1e-6)
        kr, vr = kc0.clone(), vc0.clone()
        ref = pd.reference(qkv, kr, vr, bt, lens, rope)
        for c in (None, torch.zeros(B * KV, dtype=torch.int32)):
            kc, vc = kc0.clone(), vc0.clone()
            kc.view(-1, KV, D)[slots] = float("nan")   # the own slots: never read
            vc.view(-1, KV, D)[slots] = float("nan")
            out = pd.paged_decode(qkv, kc, vc, bt, lens, splits, counters=c, rope=rope)
            err = float((out - ref).norm() / ref.norm())
            assert err < 1e-4, (B, H, KV, splits, err)
            assert torch.allclose(kc, kr, atol=1e-5) and torch.equal(vc, vr), (B, splits)
    for dt in (torch.float32, torch.float16):
        assert pd.rope_self_check(torch.device("cpu"), dt, (16, 8, 128), 64) is None
    real = pd.reference_rope
    pd.reference_rope = lambda *a: real(*a) * 1.1   # a kernel that disagrees is caught
    assert "disagrees" in pd.rope_self_check(torch.device("cpu"), torch.float32, (4, 2, 32), 16)
    print("ok")
""")

ENGINE = textwrap.dedent("""
    import sys, asyncio
    from qualflow.runtime import EngineConfig, GenerationRequest, load_task
    from qualflow.runtime.engine.cuda_graphs import DecodeGraphs
    from qualflow.runtime.kernels import fused, paged_decode
    task = load_task(sys.argv[1], EngineConfig(device="cpu", max_batch=3, max_context=64))
    def reqs():
        return [GenerationRequest(f"g{i}", [11 + i] * (3 + 7 * i), task.default_params(
            max_new_tokens=6, temperature=0.0, ignore_eos=True)) for i in range(3)]
    alone = [task.generate_sync(r).token_ids for r in reqs()]
    runner = task.engine.runner
    calls = []
    real = paged_decode.paged_decode
    paged_decode.paged_decode = lambda *a, **k: calls.append(k.get("rope")) or real(*a, **k)
    with task.engine.lock:   # the graph path's decode step, eagerly, on Triton's kernels
        task.model.ops = fused.FusedOps(use_triton=True, any_device=True)
        runner.attn.rope_inside = True
        runner.graphs = DecodeGraphs(
            task.model, runner.attn, 3, task._max_blocks, task.device, capture=False
        )
    async def together():
        async def one(r):
            return [ev async for ev in task.generate(r)][-1].token_ids
        return await asyncio.gather(*[one(r) for r in reqs()])
    assert asyncio.run(together()) == alone, "decode with RoPE inside attention differs"
    assert calls and all(r is not None for r in calls), "the kernel did not take the qkv row"
    task.close()
    print("ok")
""")


def test_kernel_and_its_self_check_interpreted(run_interpreted):
    run_interpreted(KERNEL)


def test_engine_greedy_output_unchanged_with_rope_inside_interpreted(bundle_dir, run_interpreted):
    run_interpreted(ENGINE, str(bundle_dir))


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
