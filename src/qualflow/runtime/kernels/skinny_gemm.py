"""The projections of a decode step at small batch (a few rows against a large weight): y = x @ w.T as
one Triton kernel that streams the weight once, with the rows padded to one tensor-core tile (16,
32 or 64 rows). cuBLAS's kernels for these shapes (1-64 rows, K of 1-3k) read the weight at a fraction of the copy
bandwidth; this one keeps the whole K loop in one program per block of output columns, so a step's
weight reads are the step's cost. `silu_mul=True` takes SwiGLU's fused gate_up output ([M, 2K]) as x
and applies silu(gate) * up while loading it (the down projection without its own elementwise kernel).

Each program owns BLOCK_N output columns and walks K in BLOCK_K chunks; the launch settings come from
`launch_for` (measured on the H200 by benchmarks/skinny_gemm_tune.py). The torch reference is
`reference` (CPU path, and what the kernel is checked against); rounding matches it: the product in
fp32, one rounding to the output dtype, and silu rounded before the product as `fused.ref_silu_mul`."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the reference runs
    triton = None

MAX_ROWS = 64   # rows of one step, padded to a tile of 16, 32 or 64; larger steps go to cuBLAS


def available() -> bool:
    return triton is not None


@dataclass(frozen=True)
class Launch:
    block_n: int = 32
    block_k: int = 128
    num_warps: int = 4
    num_stages: int = 4


def launch_for(n: int, k: int) -> Launch:
    """Launch settings for an [N, K] weight: narrow column blocks where N is small, so that every
    multiprocessor has a share of the weight to stream."""
    return Launch(block_n=16 if n <= 2048 else 32)


def reference(x: torch.Tensor, w: torch.Tensor, silu_mul: bool = False) -> torch.Tensor:
    """silu_mul: SwiGLU of x's halves (silu rounded to x's dtype before the product), then the GEMM."""
    if silu_mul:
        gate, up = x.chunk(2, dim=-1)
        x = F.silu(gate) * up
    return F.linear(x, w)


if triton is not None:
    @triton.jit
    def _skinny_kernel(X, W, Y, M, N, s_xm, s_wn, s_ym, K: tl.constexpr,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SILU_MUL: tl.constexpr,
                       EVEN: tl.constexpr):
        pid = tl.program_id(0)
        rn = pid * BN + tl.arange(0, BN)
        rm = tl.arange(0, BM)
        rk = tl.arange(0, BK)
        acc = tl.zeros([BM, BN], tl.float32)
        for k0 in range(0, K, BK):
            kk = k0 + rk
            xmask = (rm[:, None] < M) & (kk[None, :] < K)
            xp = X + rm[:, None] * s_xm + kk[None, :]
            if SILU_MUL:
                g = tl.load(xp, mask=xmask, other=0.0).to(tl.float32)
                u = tl.load(xp + K, mask=xmask, other=0.0)
                s = (g / (1.0 + tl.exp(-g))).to(u.dtype)
                x = (s.to(tl.float32) * u.to(tl.float32)).to(u.dtype)
            else:
                x = tl.load(xp, mask=xmask, other=0.0)
            wp = W + rn[:, None] * s_wn + kk[None, :]
            if EVEN:
                w = tl.load(wp)
            else:
                w = tl.load(wp, mask=(rn[:, None] < N) & (kk[None, :] < K), other=0.0)
            acc += tl.dot(x, tl.trans(w))
        ymask = (rm[:, None] < M) & (rn[None, :] < N)
        tl.store(Y + rm[:, None] * s_ym + rn[None, :], acc.to(Y.dtype.element_ty), mask=ymask)


def skinny_gemm(x: torch.Tensor, w: torch.Tensor, silu_mul: bool = False, launch: Launch | None = None) -> torch.Tensor:
    """x [M, K] (or [M, 2K] with `silu_mul`), 1 <= M <= MAX_ROWS, rows contiguous; w [N, K] contiguous.
    Returns [M, N] in x's dtype."""
    M = x.shape[0]
    N, K = w.shape
    if not 1 <= M <= MAX_ROWS:
        raise ValueError(f"skinny_gemm takes at most {MAX_ROWS} rows, got {M}")
    if x.stride(-1) != 1 or w.stride(-1) != 1 or x.shape[1] != (2 * K if silu_mul else K):
        raise ValueError(f"skinny_gemm: x {tuple(x.shape)} and w {tuple(w.shape)} do not match")
    lc = launch or launch_for(N, K)
    y = torch.empty(M, N, dtype=x.dtype, device=x.device)
    even = N % lc.block_n == 0 and K % lc.block_k == 0
    _skinny_kernel[(triton.cdiv(N, lc.block_n),)](
        x, w, y, M, N, x.stride(0), w.stride(0), y.stride(0), K=K,
        BM=max(16, triton.next_power_of_2(M)), BN=lc.block_n, BK=lc.block_k, SILU_MUL=silu_mul, EVEN=even,
        num_warps=lc.num_warps, num_stages=lc.num_stages)
    return y


def self_check(device: torch.device, dtype: torch.dtype, shapes: list[tuple[int, int, bool]],
               tol: float = 1e-2) -> str | None:
    """Run the kernel on this device at each (N, K, silu_mul) weight shape and at 1, 5 and MAX_ROWS rows
    against the reference; None when all agree, else why not (the caller then keeps torch's GEMM)."""
    if not available():
        return "triton is not installed"
    g = torch.Generator(device=device).manual_seed(0)
    try:
        for n, k, silu in shapes:
            w = (torch.randn(n, k, device=device, generator=g) / k ** 0.5).to(dtype)
            for m in (1, 5, MAX_ROWS):
                x = torch.randn(m, 2 * k if silu else k, device=device, generator=g).to(dtype)
                got, ref = skinny_gemm(x, w, silu).float(), reference(x.float(), w.float(), silu)
                if not (torch.isfinite(got).all() and float((got - ref).norm() / ref.norm()) < tol):
                    return f"skinny_gemm disagrees with the reference at {m} x {n} x {k}"
    except Exception as e:  # noqa: BLE001 - this build cannot compile or run the kernel
        return f"{type(e).__name__}: {e}"
    return None
