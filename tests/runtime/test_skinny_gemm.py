"""The skinny GEMM (runtime/kernels/skinny_gemm.py): the Triton kernel against its torch reference in
Triton's interpreter (where triton is installed), the engine's greedy output unchanged with it, and
the ops' CPU path (torch's GEMM) that every CPU Task runs."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

from qualflow.runtime import EngineConfig, load_task
from qualflow.runtime.kernels import fused, skinny_gemm

KERNEL = textwrap.dedent("""
    import torch
    from qualflow.runtime.kernels.skinny_gemm import Launch, reference, skinny_gemm
    torch.manual_seed(0)
    # rows 1..64 (tiles of 16, 32, 64); N not a multiple of the column block; K below and not a multiple
    # of the K block; SwiGLU on load
    for m, n, k, silu in [(1, 96, 64, False), (3, 100, 192, False), (16, 64, 128, True), (5, 48, 256, True),
                          (33, 40, 96, False), (64, 32, 64, True)]:
        x = torch.randn(m, 2 * k if silu else k).half()
        w = (torch.randn(n, k) / k ** 0.5).half()
        ref = reference(x.float(), w.float(), silu)
        for lc in (Launch(16, 64, 4, 2), Launch(32, 128, 4, 3)):
            y = skinny_gemm(x, w, silu, lc)
            assert y.shape == (m, n) and y.dtype == torch.half
            err = float((y.float() - ref).norm() / ref.norm())
            assert err < 2e-3, (m, n, k, silu, lc, err)
    print("ok")
""")

ENGINE = textwrap.dedent("""
    import sys, torch
    from qualflow.runtime import EngineConfig, GenerationRequest, SamplingParams, load_task
    from qualflow.runtime.kernels import fused, skinny_gemm
    assert skinny_gemm.self_check(torch.device("cpu"), torch.float16, [(96, 64, False), (64, 96, True)]) is None
    def reqs():
        return [GenerationRequest(f"r{i}", p, SamplingParams(max_new_tokens=3, temperature=0, ignore_eos=True))
                for i, p in enumerate([[1, 2, 3], [7] * 17])]
    task = load_task(sys.argv[1], EngineConfig(max_batch=2, max_context=64))
    ref = [task.generate_sync(r).token_ids for r in reqs()]
    calls = []
    real = skinny_gemm.skinny_gemm
    skinny_gemm.skinny_gemm = lambda *a, **k: calls.append(a[0].shape[0]) or real(*a, **k)
    task.model.ops = fused.FusedOps(use_triton=True, any_device=True, skinny_rows=1)  # decode rows only
    assert [task.generate_sync(r).token_ids for r in reqs()] == ref
    assert calls and set(calls) == {1}, calls   # every decode step's projections, no prefill's
    task.close()
    print("ok")
""")


def _interpreted(code: str, *args: str) -> None:
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    r = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def test_kernel_matches_reference_interpreted():
    _interpreted(KERNEL)


def test_engine_greedy_output_unchanged_with_the_kernel_interpreted(bundle_dir):
    _interpreted(ENGINE, str(bundle_dir))


def test_cpu_ops_run_torch_gemm_and_swiglu_before_the_down_projection():
    ops = fused.FusedOps(use_triton=False, skinny_rows=16)
    assert ops.skinny_rows == 0       # no Triton kernels on this path: nothing to route to
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(3, 8, generator=g), torch.randn(5, 8, generator=g)
    y, wd = torch.randn(3, 12, generator=g), torch.randn(4, 6, generator=g)
    assert torch.equal(ops.linear(x, w), F.linear(x, w))
    assert torch.equal(ops.down(y, wd), F.linear(F.silu(y[:, :6]) * y[:, 6:], wd))


def test_reference_applies_swiglu_on_load():
    g = torch.Generator().manual_seed(1)
    y, w = torch.randn(2, 12, generator=g), torch.randn(4, 6, generator=g)
    assert torch.allclose(skinny_gemm.reference(y, w, silu_mul=True), F.linear(fused.ref_silu_mul(y), w))


def test_too_many_rows_or_mismatched_shapes_are_refused():
    w = torch.zeros(4, 8)
    with pytest.raises(ValueError, match="at most 64 rows"):
        skinny_gemm.skinny_gemm(torch.zeros(65, 8), w)
    with pytest.raises(ValueError, match="do not match"):
        skinny_gemm.skinny_gemm(torch.zeros(2, 8), w, silu_mul=True)


def test_a_cpu_task_reports_no_skinny_rows(bundle_dir):
    task = load_task(bundle_dir, EngineConfig(max_batch=2, max_context=64, skinny_gemm_rows=16))
    try:
        assert task.info["skinny_gemm_rows"] == 0 and task.info["fused_kernels"] == "torch reference"
    finally:
        task.close()
