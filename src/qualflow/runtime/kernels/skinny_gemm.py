"""The projections of a decode step at small batch (a few rows against a large weight): y = x @ w.T as
one Triton kernel that streams the weight once, the rows padded to one tensor-core tile (16, 32 or 64
rows). A step's projections at batch 1-16 are launch-latency bound (about 5 us per kernel on an H200
whatever the weight), so the kernel's gain is in fewer and better-shaped kernels: cuBLAS splits some
of these shapes in two (13 against 5.8 us for the 0.6B's o projection at one row), and `norm_gemm`
takes the layer's residual add and RMSNorm into the GEMM's prologue (two kernels fewer per layer).

Each program owns BLOCK_N output columns and walks K in BLOCK_K chunks; `launch_for` holds the
settings measured on the H200 (benchmarks/skinny_gemm_tune.py). The torch references are `reference`
and `reference_norm_gemm` (the CPU path, and what the kernels are checked against); the rounding
matches them: the residual sum, the normalised value and its weight product rounded to the input
dtype as fused.ref_add_rms_norm does, the product accumulated in fp32 and rounded once."""
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
    block_n: int = 16
    block_k: int = 128
    num_warps: int = 2
    num_stages: int = 4


def launch_for(n: int, k: int) -> Launch:
    """Launch settings for an [N, K] weight, from the tune's grid on the H200 (within 3 % of the grid's
    best for every projection of the 0.6B at 1-16 rows): long K in chunks of 256 with four warps,
    short K in chunks of 128 with two; wide column blocks only for a vocabulary-sized N."""
    long_k = k >= 2048
    return Launch(block_n=64 if n >= 65536 else 16, block_k=256 if long_k else 128, num_warps=4 if long_k else 2)


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.linear(x, w)


def reference_norm_gemm(h, delta, wn, eps: float, w):
    """(h + delta, rms_norm(h + delta) * wn @ w.T); delta None: (h, rms_norm(h) * wn @ w.T)."""
    if delta is not None:
        h = h + delta
    xf = h.float()
    x = wn * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(h.dtype)
    return h, F.linear(x, w)


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

    @triton.jit
    def _residual_chunk(H, R, rm, kk, M, s_h, s_r, K: tl.constexpr, HAS_RES: tl.constexpr):
        """Rows rm, columns kk of h (+ delta, rounded to h's dtype)."""
        m = (rm[:, None] < M) & (kk[None, :] < K)
        hs = tl.load(H + rm[:, None] * s_h + kk[None, :], mask=m, other=0.0)
        if HAS_RES:
            hs = (hs.to(tl.float32) + tl.load(R + rm[:, None] * s_r + kk[None, :], mask=m, other=0.0).to(tl.float32))
            hs = hs.to(H.dtype.element_ty)
        return hs

    @triton.jit
    def _norm_gemm_kernel(H, R, WN, W, HO, Y, M, N, s_h, s_r, s_ho, s_wn, s_ym, eps, K: tl.constexpr,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, HAS_RES: tl.constexpr,
                          EVEN: tl.constexpr):
        pid = tl.program_id(0)
        rn = pid * BN + tl.arange(0, BN)
        rm = tl.arange(0, BM)
        rk = tl.arange(0, BK)
        ss = tl.zeros([BM], tl.float32)
        for k0 in range(0, K, BK):   # pass 1: the rows' sum of squares (program 0 also stores h + delta)
            kk = k0 + rk
            hs = _residual_chunk(H, R, rm, kk, M, s_h, s_r, K, HAS_RES)
            if HAS_RES:
                tl.store(HO + rm[:, None] * s_ho + kk[None, :], hs, mask=(rm[:, None] < M) & (kk[None, :] < K) & (pid == 0))
            xf = hs.to(tl.float32)
            ss += tl.sum(xf * xf, 1)
        rstd = 1.0 / tl.sqrt(ss / K + eps)
        acc = tl.zeros([BM, BN], tl.float32)
        for k0 in range(0, K, BK):   # pass 2: normalise, weight, multiply
            kk = k0 + rk
            hs = _residual_chunk(H, R, rm, kk, M, s_h, s_r, K, HAS_RES)
            normed = (hs.to(tl.float32) * rstd[:, None]).to(H.dtype.element_ty)
            wn = tl.load(WN + kk, mask=kk < K, other=0.0)
            x = (normed.to(tl.float32) * wn.to(tl.float32)[None, :]).to(H.dtype.element_ty)
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


def norm_gemm(h: torch.Tensor, delta: torch.Tensor | None, wn: torch.Tensor, eps: float, w: torch.Tensor,
              launch: Launch | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The residual add, RMSNorm (weight wn) and projection w of `reference_norm_gemm` in one kernel:
    h, delta [M, K] (delta None: no add); returns (h + delta, the projection [M, N])."""
    _check(h, w)
    (M, K), N = h.shape, w.shape[0]
    lc, meta = _tiles(M, N, K, launch)
    ho = torch.empty_like(h) if delta is not None else h
    r = delta if delta is not None else h
    y = torch.empty(M, N, dtype=h.dtype, device=h.device)
    _norm_gemm_kernel[(triton.cdiv(N, lc.block_n),)](
        h, r, wn, w, ho, y, M, N, h.stride(0), r.stride(0), ho.stride(0), w.stride(0), y.stride(0), eps,
        HAS_RES=delta is not None, **meta)
    return ho, y


def self_check(device: torch.device, dtype: torch.dtype, shapes: list[tuple[int, int]], eps: float = 1e-6,
               tol: float = 1e-2) -> str | None:
    """Run both kernels on this device at each (N, K) weight shape and at 1, 5 and MAX_ROWS rows against
    the references; None when all agree, else why not (the caller then keeps torch's GEMM)."""
    if not available():
        return "triton is not installed"
    g = torch.Generator(device=device).manual_seed(0)
    rnd = lambda *s: torch.randn(*s, device=device, generator=g).to(dtype)  # noqa: E731
    close = lambda a, b: bool(torch.isfinite(a).all()) and float((a.float() - b.float()).norm() / b.float().norm()) < tol  # noqa: E731
    try:
        for n, k in shapes:
            w, wn = (torch.randn(n, k, device=device, generator=g) / k ** 0.5).to(dtype), rnd(k)
            for m in (1, 5, MAX_ROWS):
                x, d = rnd(m, k), rnd(m, k)
                if not close(skinny_gemm(x, w), reference(x.float(), w.float())):
                    return f"skinny_gemm disagrees with the reference at {m} x {n} x {k}"
                for delta in (d, None):
                    got, ref = norm_gemm(x, delta, wn, eps, w), reference_norm_gemm(x, delta, wn, eps, w)
                    if not (close(got[0], ref[0]) and close(got[1], ref[1])):
                        return f"norm_gemm disagrees with the reference at {m} x {n} x {k}"
    except Exception as e:  # noqa: BLE001 - this build cannot compile or run the kernels
        return f"{type(e).__name__}: {e}"
    return None
