"""The skinny GEMM (runtime/kernels/skinny_gemm.py): the Triton kernel against its torch
reference in Triton's interpreter (where triton is installed), the engine's greedy output
unchanged with it, and the ops' CPU path (torch's GEMM) that every CPU Task runs."""

import textwrap

import pytest
import torch
import torch.nn.functional as F

from qualflow.runtime import EngineConfig, load_task
from qualflow.runtime.kernels import fused, skinny_gemm

KERNEL = textwrap.dedent("""
    import torch
    from qualflow.runtime.kernels.skinny_gemm import (Launch, reference, reference_gate_up_silu,
                                                      self_check, skinny_gate_up_silu, skinny_gemm)
    torch.manual_seed(0)
    # rows 1..64 (tiles of 16, 32, 64); N not a multiple of the column block; K below and not a
    # multiple of the K block
    shapes = [(1, 96, 64), (3, 100, 192), (16, 64, 128), (5, 48, 256), (33, 40, 96), (64, 32, 64)]
    for m, n, k in shapes:
        x, w = torch.randn(m, k).half(), (torch.randn(n, k) / k ** 0.5).half()
        ref = reference(x.float(), w.float())
        for lc in (Launch(16, 64, 4, 2), Launch(32, 128, 2, 3)):
            y = skinny_gemm(x, w, lc)
            assert y.shape == (m, n) and y.dtype == torch.half
            err = float((y.float() - ref).norm() / ref.norm())
            assert err < 2e-3, (m, n, k, lc, err)
            # the gate_up form: w holds 2n rows (gate, up), the output is silu(gate) * up [m, n]
            w2 = (torch.randn(2 * n, k) / k ** 0.5).half()
            y2, ref2 = skinny_gate_up_silu(x, w2, lc), reference_gate_up_silu(x.float(), w2.float())
            assert y2.shape == (m, n) and y2.dtype == torch.half
            err = float((y2.float() - ref2).norm() / ref2.norm())
            assert err < 2e-3, ("gate_up", m, n, k, lc, err)
    assert self_check(torch.device("cpu"), torch.float16, [(96, 64), (64, 96)], (192, 64)) is None
    print("ok")
""")


def test_kernel_matches_reference_interpreted(run_interpreted):
    run_interpreted(KERNEL)


def test_engine_greedy_output_unchanged_with_the_kernel_interpreted(
    bundle_dir, run_interpreted, engine_check
):
    script = engine_check("skinny_gemm", "skinny_gemm", "skinny_gate_up_silu", "skinny_rows=1")
    run_interpreted(script, str(bundle_dir))


def test_cpu_ops_run_torch_gemm():
    ops = fused.FusedOps(use_triton=False, skinny_rows=16)
    assert ops.skinny_rows == 0  # no Triton kernels on this path: nothing to route to
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(3, 8, generator=g), torch.randn(5, 8, generator=g)
    assert torch.equal(ops.linear(x, w), F.linear(x, w))
    w2 = torch.randn(10, 8, generator=g)
    assert torch.equal(ops.gate_up_silu(x, w2), fused.ref_silu_mul(F.linear(x, w2)))


def test_too_many_rows_or_mismatched_shapes_are_refused():
    w = torch.zeros(4, 8)
    with pytest.raises(ValueError, match="at most 64 rows"):
        skinny_gemm.skinny_gemm(torch.zeros(65, 8), w)
    with pytest.raises(ValueError, match="do not match"):
        skinny_gemm.skinny_gemm(torch.zeros(2, 6), w)
    with pytest.raises(ValueError, match="odd number of rows"):
        skinny_gemm.skinny_gate_up_silu(torch.zeros(2, 8), torch.zeros(5, 8))


def test_a_cpu_task_reports_no_skinny_rows(bundle_dir):
    task = load_task(bundle_dir, EngineConfig(max_batch=2, max_context=64, skinny_gemm_rows=16))
    try:
        assert (
            task.info["skinny_gemm_rows"] == 0 and task.info["fused_kernels"] == "torch reference"
        )
        assert (
            task.info["programmatic_launch"] == "off: no CUDA graphs or Triton kernels on this path"
        )
    finally:
        task.close()
