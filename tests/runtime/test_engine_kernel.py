"""The paged decode kernel against a plain-torch reference, in Triton's interpreter (CPU), in both
its forms (q given; the qkv row with the q/k-norm + RoPE and the K/V store inside), alone and as the
engine's decode step. Skipped where Triton is not installed (the CPU-only CI path never calls the
kernel)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")

CHECK = textwrap.dedent("""
    import torch
    from qualflow.runtime.kernels.paged_decode import QkRope, paged_decode, reference
    g = torch.Generator().manual_seed(1)
    shapes = [(3, 4, 2, 32, 16, 1), (3, 4, 2, 32, 16, 4), (2, 16, 8, 64, 16, 2),
              (3, 4, 2, 32, 16, 16)]   # the last: more splits than a short context has blocks
    for B, H, KV, D, BS, splits in shapes:
        nb, M = 40, 8
        kc, vc = torch.randn(nb, BS, KV, D, generator=g), torch.randn(nb, BS, KV, D, generator=g)
        q = torch.randn(B, H, D, generator=g)
        lens = torch.tensor([1, 37, 80][:B], dtype=torch.int32)   # one block, several, a full table
        perm = torch.randperm(nb - 1, generator=g) + 1   # scattered blocks, never block 0
        bt = torch.stack([perm[b * M:(b + 1) * M] for b in range(B)]).to(torch.int32)
        ref = reference(q, kc, vc, bt, lens)
        counters = torch.zeros(B * KV, dtype=torch.int32)
        # the merge kernel; the last split merging (twice: the counters are left at zero for the
        # next call)
        for c in (None, counters, counters):
            out = paged_decode(q, kc, vc, bt, lens, splits, counters=c)
            err = float((out - ref).norm() / ref.norm())
            assert err < 1e-4, (B, H, KV, splits, c is not None, err)
            assert not counters.any()
        # the q/k-norm + RoPE form: q is the qkv row; the new K/V go to each query's own slot,
        # which it must not read (poisoned), and equal what the unfused reference stores
        qkv = torch.randn(B, (H + 2 * KV) * D, generator=g) * 3
        pos = (lens - 1).long()
        slots = torch.stack([bt[b, pos[b] // BS].long() * BS + pos[b] % BS for b in range(B)])
        ang = torch.rand(128, D, generator=g) * 6.28
        wq, wk = torch.randn(D, generator=g), torch.randn(D, generator=g)
        rope = QkRope(wq, wk, ang.cos(), ang.sin(), pos, slots, 1e-6)
        kr, vr = kc.clone(), vc.clone()
        ref = reference(qkv, kr, vr, bt, lens, rope)
        for c in (None, counters):
            kp, vp = kc.clone(), vc.clone()
            kp.view(-1, KV, D)[slots] = float("nan")
            vp.view(-1, KV, D)[slots] = float("nan")
            out = paged_decode(qkv, kp, vp, bt, lens, splits, counters=c, rope=rope)
            err = float((out - ref).norm() / ref.norm())
            assert err < 1e-4, ("rope", B, H, KV, splits, err)
            assert torch.allclose(kp, kr, atol=1e-5) and torch.equal(vp, vr), (B, splits)
    try:
        paged_decode(q, kc, vc, bt, lens, 2, counters=torch.zeros(B * KV - 1, dtype=torch.int32))
    except ValueError as e:
        assert "counters" in str(e)
    else:
        raise AssertionError("too few counters were taken")
    print("ok")
""")


def test_paged_decode_kernel_matches_reference():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    r = subprocess.run(
        [sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


GRAPH_STEP = textwrap.dedent("""
    import sys
    from qualflow.runtime import EngineConfig, GenerationRequest, load_task
    from qualflow.runtime.engine.cuda_graphs import DecodeGraphs
    cfg = EngineConfig(device="cpu", max_batch=3, max_context=64, block_size=16)
    task = load_task(sys.argv[1], cfg)
    def reqs():
        return [GenerationRequest(f"g{i}", [11 + i] * (3 + 7 * i), task.default_params(
            max_new_tokens=6, temperature=0.0, ignore_eos=True)) for i in range(3)]
    alone = [task.generate_sync(r).token_ids for r in reqs()]
    runner = task.engine.runner
    # the decode step of the CUDA graph path, eagerly: same buffers, paged kernel
    with task.engine.lock:
        runner.graphs = DecodeGraphs(
            task.model, runner.attn, 3, task._max_blocks, task.device, capture=False
        )
    import asyncio
    async def together():
        async def one(r):
            return [ev async for ev in task.generate(r)][-1].token_ids
        return await asyncio.gather(*[one(r) for r in reqs()])
    assert asyncio.run(together()) == alone, "paged decode differs"
    # and with the q/k-norm + RoPE and the K/V store inside the kernel
    from qualflow.runtime.kernels import paged_decode
    calls, real = [], paged_decode.paged_decode
    paged_decode.paged_decode = lambda *a, **k: calls.append(k.get("rope")) or real(*a, **k)
    runner.attn.rope_inside = True
    assert asyncio.run(together()) == alone, "paged decode with RoPE inside differs"
    assert calls and all(r is not None for r in calls), "the kernel did not take the qkv row"
    task.close()
    print("ok")
""")


def test_graph_decode_step_matches_varlen(bundle_dir):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    r = subprocess.run(
        [sys.executable, "-c", GRAPH_STEP, str(bundle_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
