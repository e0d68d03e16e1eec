"""The fused qkv projection + q/k RMSNorm + RoPE + K/V store (runtime/kernels/qkv_rope.py): the Triton
kernel against the unfused reference in Triton's interpreter (where triton is installed), and the ops'
CPU path, which every CPU Task runs."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

from qualflow.runtime.kernels import fused, qkv_rope
from qualflow.runtime.kernels.destination import KvDestination

KERNEL = textwrap.dedent("""
    import torch
    from qualflow.runtime.kernels import qkv_rope
    for dt in (torch.float32, torch.float16):
        # the embedded tiny model's heads and Qwen3-0.6B's: (heads, kv heads, head dim, hidden)
        for shape in [(4, 2, 32, 128), (16, 8, 128, 1024), (4, 4, 64, 96)]:   # the last: hidden not a K block
            why = qkv_rope.self_check(torch.device("cpu"), dt, *shape, tol=1e-3)
            assert why is None, (dt, shape, why)
    print("ok")
""")


def test_kernel_matches_the_unfused_reference_interpreted():
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    r = subprocess.run([sys.executable, "-c", KERNEL], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def _inputs(m=3, heads=4, kv=2, d=32, hidden=64):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(m, hidden, generator=g)
    w = torch.randn((heads + 2 * kv) * d, hidden, generator=g) / hidden ** 0.5
    ang = torch.rand(16, d, generator=g) * 6.28
    return x, w, torch.randn(d, generator=g), torch.randn(d, generator=g), (ang.cos(), ang.sin())


def test_cpu_ops_run_the_projection_then_the_reference():
    x, w, wq, wk, rope = _inputs()
    pos, slots = torch.tensor([0, 5, 9]), torch.tensor([3, 0, 7])
    outs = []
    for run in (fused.FusedOps(use_triton=False, skinny_rows=16).qkv_norm_rope, None):
        kc, vc = torch.zeros(8, 2, 32), torch.zeros(8, 2, 32)
        dest = KvDestination(kc, vc, slots)
        if run is None:
            got = fused.ref_qk_norm_rope(F.linear(x, w), wq, wk, *rope, pos, 4, 2, 1e-6, dest)
        else:
            got = run(x, w, wq, wk, rope, pos, 4, 2, 1e-6, dest)
        outs.append((*got, kc, vc))
    assert all(torch.equal(a, b) for a, b in zip(*outs))
    assert outs[0][3].abs().sum() > 0       # k was stored


def test_a_projection_that_is_not_q_and_two_equal_kv_halves_is_refused():
    x, w, wq, wk, rope = _inputs()
    with pytest.raises(ValueError, match="not 4 q heads"):
        qkv_rope.qkv_rope(x, w[:-32], wq, wk, rope, torch.zeros(3, dtype=torch.long), 4, 1e-6)
