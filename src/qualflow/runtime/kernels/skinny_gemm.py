"""The projections of a decode step at small batch (a few rows against a large weight): y = x @ w.T as
one Triton kernel that streams the weight once, the rows padded to one tensor-core tile (16, 32 or 64
rows). A step's projections at 1-16 rows are launch-latency bound (about 5 us per kernel on an H200
whatever the weight), so the gain is in the shape of the kernel, not the bandwidth: cuBLAS splits
some of these shapes in two (13 against 5.6 us for the 0.6B's o projection at one row), and a
vocabulary-sized projection streams at the copy bandwidth (benchmarks/skinny_gemm_tune.py). Taking
the residual add and RMSNorm into the GEMM's prologue was measured too and was no faster than the
fused add_rms_norm kernel before it, so it is not here.

Each program owns BLOCK_N output columns and walks K in BLOCK_K chunks; `launch_for` holds the
settings measured on the H200. The torch reference is `reference` (the CPU path, and what the kernel
is checked against): the product accumulated in fp32 and rounded once to the output dtype."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .checks import agrees

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
    block_n: int = 16
    block_k: int = 128
    num_warps: int = 2
    num_stages: int = 4


def launch_for(n: int, k: int) -> Launch:
    """Launch settings for an [N, K] weight, from the tune's grid on the H200 (2026-12-03, within 0.5 us
    of the grid's best for every projection of the 0.6B at 1-16 rows): K in chunks of 256 from 2,048 on,
    of 128 below; columns in blocks of 16, of 64 for a vocabulary-sized N."""
    return Launch(block_n=64 if n >= 65536 else 16, block_k=256 if k >= 2048 else 128)


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.linear(x, w)


if triton is not None:
    @triton.jit
    def _skinny_kernel(X, W, Y, M, N, s_xm, s_wn, s_ym, K: tl.constexpr,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EVEN: tl.constexpr):
        rn = tl.program_id(0) * BN + tl.arange(0, BN)
        rm = tl.arange(0, BM)
        rk = tl.arange(0, BK)
        acc = tl.zeros([BM, BN], tl.float32)
        for k0 in range(0, K, BK):
            kk = k0 + rk
            x = tl.load(X + rm[:, None] * s_xm + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
            wp = W + rn[:, None] * s_wn + kk[None, :]
            if EVEN:
                w = tl.load(wp)
            else:
                w = tl.load(wp, mask=(rn[:, None] < N) & (kk[None, :] < K), other=0.0)
            acc += tl.dot(x, tl.trans(w))
        tl.store(Y + rm[:, None] * s_ym + rn[None, :], acc.to(Y.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _check(x: torch.Tensor, w: torch.Tensor) -> None:
    if not 1 <= x.shape[0] <= MAX_ROWS:
        raise ValueError(f"skinny_gemm takes at most {MAX_ROWS} rows, got {x.shape[0]}")
    if x.stride(-1) != 1 or w.stride(-1) != 1 or x.shape[1] != w.shape[1]:
        raise ValueError(f"skinny_gemm: x {tuple(x.shape)} and w {tuple(w.shape)} do not match")


def _tiles(m: int, n: int, k: int, launch: Launch | None) -> tuple[Launch, dict]:
    lc = launch or launch_for(n, k)
    return lc, dict(K=k, BM=max(16, triton.next_power_of_2(m)), BN=lc.block_n, BK=lc.block_k,
                    EVEN=n % lc.block_n == 0 and k % lc.block_k == 0, num_warps=lc.num_warps,
                    num_stages=lc.num_stages)


def skinny_gemm(x: torch.Tensor, w: torch.Tensor, launch: Launch | None = None) -> torch.Tensor:
    """x [M, K], 1 <= M <= MAX_ROWS, unit stride along K; w [N, K] likewise. Returns [M, N] in x's dtype."""
    _check(x, w)
    (M, K), N = x.shape, w.shape[0]
    lc, meta = _tiles(M, N, K, launch)
    y = torch.empty(M, N, dtype=x.dtype, device=x.device)
    _skinny_kernel[(triton.cdiv(N, lc.block_n),)](x, w, y, M, N, x.stride(0), w.stride(0), y.stride(0), **meta)
    return y


def self_check(device: torch.device, dtype: torch.dtype, shapes: list[tuple[int, int]], tol: float = 1e-2) -> str | None:
    """Run the kernel on this device at each (N, K) weight shape and at 1, 5 and MAX_ROWS rows against the
    reference; None when all agree, else why not (the caller then keeps torch's GEMM)."""
    if not available():
        return "triton is not installed"
    g = torch.Generator(device=device).manual_seed(0)
    try:
        for n, k in shapes:
            w = (torch.randn(n, k, device=device, generator=g) / k ** 0.5).to(dtype)
            for m in (1, 5, MAX_ROWS):
                x = torch.randn(m, k, device=device, generator=g).to(dtype)
                if not agrees(skinny_gemm(x, w), reference(x.float(), w.float()), tol):
                    return f"skinny_gemm disagrees with the reference at {m} x {n} x {k}"
    except Exception as e:  # noqa: BLE001 - this build cannot compile or run the kernel
        return f"{type(e).__name__}: {e}"
    return None
