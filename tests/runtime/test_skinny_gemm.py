"""The skinny GEMM (runtime/kernels/skinny_gemm.py): the Triton kernel against its torch reference in
Triton's interpreter (where triton is installed), the engine's greedy output unchanged with it, and
the ops' CPU path (add_rms_norm, then torch's GEMM) that every CPU Task runs."""
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
    from qualflow.runtime.kernels.skinny_gemm import Launch, norm_gemm, reference, reference_norm_gemm, skinny_gemm
    torch.manual_seed(0)
    rel = lambda a, b: float((a.float() - b.float()).norm() / b.float().norm())
    # rows 1..64 (tiles of 16, 32, 64); N not a multiple of the column block; K below and not a multiple
    # of the K block
    for m, n, k in [(1, 96, 64), (3, 100, 192), (16, 64, 128), (5, 48, 256), (33, 40, 96), (64, 32, 64)]:
        x, d = torch.randn(m, k).half(), torch.randn(m, k).half()
        w, wn = (torch.randn(n, k) / k ** 0.5).half(), torch.randn(k).half()
        for lc in (Launch(16, 64, 4, 2), Launch(32, 128, 2, 3)):
            y = skinny_gemm(x, w, lc)
            assert y.shape == (m, n) and y.dtype == torch.half
            assert rel(y, reference(x.float(), w.float())) < 2e-3, (m, n, k, lc)
            for delta in (d, None):
                h, y = norm_gemm(x, delta, wn, 1e-6, w, lc)
                rh, ry = reference_norm_gemm(x.float(), None if delta is None else delta.float(), wn.float(), 1e-6,
                                             w.float())
                assert y.shape == (m, n) and torch.equal(h, x + d if delta is not None else x), (m, n, k, lc)
                assert rel(y, ry) < 5e-3, (m, n, k, lc, delta is None, rel(y, ry))
    print("ok")
""")

ENGINE = textwrap.dedent("""
    import sys, torch
    from qualflow.runtime import EngineConfig, GenerationRequest, SamplingParams, load_task
    from qualflow.runtime.kernels import fused, skinny_gemm
    assert skinny_gemm.self_check(torch.device("cpu"), torch.float16, [(96, 64), (64, 96)]) is None
    def reqs():
        return [GenerationRequest(f"r{i}", p, SamplingParams(max_new_tokens=3, temperature=0, ignore_eos=True))
                for i, p in enumerate([[1, 2, 3], [7] * 17])]
    task = load_task(sys.argv[1], EngineConfig(max_batch=2, max_context=64))
    ref = [task.generate_sync(r).token_ids for r in reqs()]
    calls = []
    for name in ("skinny_gemm", "norm_gemm"):
        real = getattr(skinny_gemm, name)
        setattr(skinny_gemm, name, lambda *a, real=real, name=name, **k: calls.append((name, a[0].shape[0])) or real(*a, **k))
    task.model.ops = fused.FusedOps(use_triton=True, any_device=True, skinny_rows=1)  # decode rows only
    assert [task.generate_sync(r).token_ids for r in reqs()] == ref
    assert set(calls) == {("skinny_gemm", 1), ("norm_gemm", 1)}, calls   # decode steps' projections, no prefill's
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


def test_cpu_ops_run_torch_gemm_after_the_norm():
    ops = fused.FusedOps(use_triton=False, skinny_rows=16)
    assert ops.skinny_rows == 0       # no Triton kernels on this path: nothing to route to
    g = torch.Generator().manual_seed(0)
    h, d, wn, w = (torch.randn(3, 8, generator=g), torch.randn(3, 8, generator=g), torch.randn(8, generator=g),
                   torch.randn(5, 8, generator=g))
    assert torch.equal(ops.linear(h, w), F.linear(h, w))
    for delta in (d, None):
        got = ops.norm_linear(h, delta, wn, 1e-6, w)
        h2, x = fused.ref_add_rms_norm(h, delta, wn, 1e-6)
        assert torch.equal(got[0], h2) and torch.equal(got[1], F.linear(x, w))


def test_norm_gemm_reference_is_add_rms_norm_then_the_projection():
    g = torch.Generator().manual_seed(1)
    h, d, wn, w = (torch.randn(2, 6, generator=g), torch.randn(2, 6, generator=g), torch.randn(6, generator=g),
                   torch.randn(4, 6, generator=g))
    h2, x = fused.ref_add_rms_norm(h, d, wn, 1e-6)
    got = skinny_gemm.reference_norm_gemm(h, d, wn, 1e-6, w)
    assert torch.equal(got[0], h2) and torch.allclose(got[1], F.linear(x, w))


def test_too_many_rows_or_mismatched_shapes_are_refused():
    w = torch.zeros(4, 8)
    with pytest.raises(ValueError, match="at most 64 rows"):
        skinny_gemm.skinny_gemm(torch.zeros(65, 8), w)
    with pytest.raises(ValueError, match="do not match"):
        skinny_gemm.skinny_gemm(torch.zeros(2, 6), w)


def test_a_cpu_task_reports_no_skinny_rows(bundle_dir):
    task = load_task(bundle_dir, EngineConfig(max_batch=2, max_context=64, skinny_gemm_rows=16))
    try:
        assert task.info["skinny_gemm_rows"] == 0 and task.info["fused_kernels"] == "torch reference"
    finally:
        task.close()
