"""The one-row GEMV with the RMSNorm inside (runtime/kernels/norm_gemv.py): the Triton kernel
against the unfused step's torch reference in Triton's interpreter (where triton is installed), the
engine's greedy output unchanged with it on every one-row decode step, its refusals, the ops' CPU
path (add_rms_norm, then the projection) and the CPU Task's report that it is off."""

import textwrap

import pytest
import torch
import torch.nn.functional as F

from qualflow.runtime import EngineConfig, load_task
from qualflow.runtime.kernels import fused, norm_gemv
from qualflow.runtime.kernels.reference import ref_add_rms_norm, ref_silu_mul

KERNEL = textwrap.dedent("""
    import torch
    from qualflow.runtime.kernels.gemv import GemvLaunch, Launch
    from qualflow.runtime.kernels.norm_gemv import (add_norm_gemv, add_norm_gemv_gate_up_silu,
                                                    reference_norm, self_check)
    torch.manual_seed(0)
    # N not a multiple of the column block; K below, at and not a multiple of the K block
    for n, k in [(96, 64), (100, 192), (48, 256), (40, 96)]:
        w_norm = (torch.randn(k) * 0.1 + 1).half()
        w, w2 = (torch.randn(n, k) / k ** 0.5).half(), (torch.randn(2 * n, k) / k ** 0.5).half()
        for lc in (Launch(4, 64, 1, 2), Launch(16, 128, 2, 3), GemvLaunch(4, 64, 1, 2, prefetch=2)):
            for residual in (False, True):
                h = torch.randn(1, k).half()
                delta = torch.randn(1, k).half() if residual else None
                for kernel, weight, glu in ((add_norm_gemv, w, False),
                                            (add_norm_gemv_gate_up_silu, w2, True)):
                    h2, y = kernel(h, delta, w_norm, 1e-6, weight, lc)
                    r2, ref = reference_norm(h, delta, w_norm, 1e-6, weight, glu)
                    assert torch.equal(h2, r2), (n, k, lc, residual, glu)  # the residual stream
                    assert residual or h2 is h  # no residual: the stream as it was
                    assert y.shape == (1, n) and y.dtype == torch.half
                    err = float((y.float() - ref).norm() / ref.norm())
                    assert err < 2e-3, (n, k, lc, residual, glu, err)
    shapes = [(96, 64), (192, 64)]
    assert self_check(torch.device("cpu"), torch.float16, shapes, [False, True]) is None
    print("ok")
""")


def test_kernel_matches_the_unfused_reference_interpreted(run_interpreted):
    run_interpreted(KERNEL)


def test_engine_greedy_output_unchanged_with_the_normed_gemv_interpreted(
    bundle_dir, run_interpreted, engine_check
):
    ops = "skinny_rows=1, one_row_gemv=True, norm_gemv=True"
    script = engine_check("norm_gemv", "add_norm_gemv", "add_norm_gemv_gate_up_silu", ops)
    run_interpreted(script, str(bundle_dir))


def test_more_than_one_row_or_mismatched_shapes_are_refused():
    h, w_norm, w = torch.zeros(1, 8), torch.ones(8), torch.zeros(4, 8)
    with pytest.raises(ValueError, match="one row"):
        norm_gemv.add_norm_gemv(torch.zeros(2, 8), None, w_norm, 1e-6, w)
    with pytest.raises(ValueError, match="one row"):
        norm_gemv.add_norm_gemv(h, None, torch.ones(6), 1e-6, w)
    with pytest.raises(ValueError, match="delta"):
        norm_gemv.add_norm_gemv(h, torch.zeros(1, 6), w_norm, 1e-6, w)
    with pytest.raises(ValueError, match="odd number of rows"):
        norm_gemv.add_norm_gemv_gate_up_silu(h, None, w_norm, 1e-6, torch.zeros(5, 8))


def test_cpu_ops_run_add_rms_norm_then_the_projection():
    """The path every CPU Task runs (and a CUDA step of more than one row): the unfused ops."""
    ops = fused.FusedOps(use_triton=False, skinny_rows=16, one_row_gemv=True, norm_gemv=True)
    assert not ops.norm_gemv  # without Triton nothing routes to the kernel
    g = torch.Generator().manual_seed(0)
    h, d = torch.randn(1, 8, generator=g), torch.randn(1, 8, generator=g)
    w_norm, w, w2 = torch.randn(8, generator=g), torch.randn(5, 8, generator=g), torch.randn(6, 8)
    for delta in (None, d):
        h2, x = ref_add_rms_norm(h, delta, w_norm, 1e-6)
        got_h, got = ops.norm_linear(h, delta, w_norm, 1e-6, w)
        assert torch.equal(got_h, h2) and torch.equal(got, F.linear(x, w))
        got_h, got = ops.norm_gate_up_silu(h, delta, w_norm, 1e-6, w2)
        assert torch.equal(got_h, h2) and torch.equal(got, ref_silu_mul(F.linear(x, w2)))


def test_the_normed_gemv_needs_the_one_row_gemv():
    assert not fused.FusedOps(use_triton=True, skinny_rows=16, norm_gemv=True).norm_gemv


def test_a_cpu_task_reports_the_normed_gemv_off(bundle_dir):
    cfg = EngineConfig(max_batch=2, max_context=64, one_row_gemv=True, norm_gemv=True)
    task = load_task(bundle_dir, cfg)
    try:
        assert task.info["norm_gemv"] is False
    finally:
        task.close()
