"""The one-row GEMV (runtime/kernels/gemv.py): the Triton kernel against its torch reference in
Triton's interpreter (where triton is installed), with one or two weight chunks loaded before the
wait, the engine's greedy output unchanged with it on every one-row decode step, its refusals,
and the CPU Task's report that it is off."""

import textwrap

import pytest
import torch

from qualflow.runtime import EngineConfig, load_task
from qualflow.runtime.kernels import fused, gemv

KERNEL = textwrap.dedent("""
    import torch
    from qualflow.runtime.kernels.gemv import (GemvLaunch, Launch, gemv, gemv_gate_up_silu,
                                               self_check)
    from qualflow.runtime.kernels.skinny_gemm import reference, reference_gate_up_silu
    torch.manual_seed(0)
    # N not a multiple of the column block; K below, at and not a multiple of the K block
    for n, k in [(96, 64), (100, 192), (64, 128), (48, 256), (40, 96), (1024, 2048)]:
        x, w = torch.randn(1, k).half(), (torch.randn(n, k) / k ** 0.5).half()
        ref = reference(x.float(), w.float())
        # two chunks loaded before the wait where K holds two (else one)
        for lc in (Launch(4, 64, 1, 2), Launch(8, 128, 2, 3), Launch(16, 256, 4, 3),
                   GemvLaunch(4, 64, 1, 2, prefetch=2), GemvLaunch(8, 128, 2, 3, prefetch=2)):
            y = gemv(x, w, lc)
            assert y.shape == (1, n) and y.dtype == torch.half
            err = float((y.float() - ref).norm() / ref.norm())
            assert err < 2e-3, (n, k, lc, err)
            w2 = (torch.randn(2 * n, k) / k ** 0.5).half()
            y2 = gemv_gate_up_silu(x, w2, lc)
            ref2 = reference_gate_up_silu(x.float(), w2.float())
            assert y2.shape == (1, n) and y2.dtype == torch.half
            err = float((y2.float() - ref2).norm() / ref2.norm())
            assert err < 2e-3, ("gate_up", n, k, lc, err)
    assert self_check(torch.device("cpu"), torch.float16, [(96, 64), (64, 96)], (192, 64)) is None
    print("ok")
""")


def test_kernel_matches_reference_interpreted(run_interpreted):
    run_interpreted(KERNEL)


def test_engine_greedy_output_unchanged_with_the_gemv_interpreted(
    bundle_dir, run_interpreted, engine_check
):
    script = engine_check("gemv", "gemv", "gemv_gate_up_silu", "skinny_rows=1, one_row_gemv=True")
    run_interpreted(script, str(bundle_dir))


def test_more_than_one_row_or_mismatched_shapes_are_refused():
    w = torch.zeros(4, 8)
    with pytest.raises(ValueError, match="one row"):
        gemv.gemv(torch.zeros(2, 8), w)
    with pytest.raises(ValueError, match="one row"):
        gemv.gemv(torch.zeros(1, 6), w)
    with pytest.raises(ValueError, match="odd number of rows"):
        gemv.gemv_gate_up_silu(torch.zeros(1, 8), torch.zeros(5, 8))


def test_the_gemv_needs_the_skinny_rows():
    """Without Triton (or with the skinny GEMM off) nothing routes to the GEMV."""
    assert not fused.FusedOps(use_triton=False, skinny_rows=16, one_row_gemv=True).one_row_gemv
    assert not fused.FusedOps(use_triton=True, skinny_rows=0, one_row_gemv=True).one_row_gemv


def test_a_cpu_task_reports_the_gemv_off(bundle_dir):
    task = load_task(bundle_dir, EngineConfig(max_batch=2, max_context=64, one_row_gemv=True))
    try:
        assert task.info["one_row_gemv"] is False
    finally:
        task.close()
