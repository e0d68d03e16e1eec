"""The projections of a decode step of one row: y = x @ w.T as a GEMV, without tensor cores.

The skinny GEMM (kernels.skinny_gemm) pads one row to a 16-row tensor-core tile and gives each
program at least 16 output columns; the 0.6B's o and down projections (1,024 columns) then run on
64 programs, half the H100's SMs, each walking a long K. Here a program owns BN columns (4 to
64), multiplies its [BN, BK] weight chunks by x's chunk in float32 and keeps the products'
partial sums per lane, summing across the lanes once at the end; so narrow column blocks give
every projection enough programs to fill the GPU.

`gemv_gate_up_silu` is SwiGLU's gate_up projection in the same form: each program owns BN columns
of both halves and writes silu(gate) * up, rounded where the fused layer rounds (the product,
then silu, then the final product), as skinny_gemm's GLU form does.

The kernel's NORM form takes the residual add and RMSNorm before the projection into it
(kernels.norm_gemv holds its callers): each program computes the row's inverse RMS itself and
normalises x's chunks as it reads them.

Launched with programmatic dependent launch (kernels.pdl), a program loads its first weight chunk
(or its first two: `GemvLaunch.prefetch`) before it waits for the kernel before it, so that the
weight streams in while that kernel still runs. `launch_for` holds the settings chosen by the tune
(benchmarks/kernels/gemv_tune.py). The weight-chunk load and the torch reference are
skinny_gemm's (the reference: the product accumulated in float32, rounded once), and the launch
record extends its Launch."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .checks import check_projections
from .pdl import gdc_launch_dependents, gdc_wait, options
from .skinny_gemm import Launch, available, reference, reference_gate_up_silu

try:
    import triton
    import triton.language as tl

    from .skinny_gemm import _load_w
except ImportError:  # CPU-only installs: the reference runs
    triton = None

__all__ = [
    "GemvLaunch",
    "Launch",
    "available",
    "gemv",
    "gemv_gate_up_silu",
    "launch_for",
    "run",
    "self_check",
]


@dataclass(frozen=True)
class GemvLaunch(Launch):
    """skinny_gemm's launch settings and `prefetch`: the weight chunks (1 or 2) a program loads
    before it waits for the kernel before it (2 only where K holds two chunks)."""

    prefetch: int = 1


def launch_for(n: int, k: int) -> GemvLaunch:
    """Launch settings for an [N, K] weight, the tune's best on the H100
    (results/NVIDIA-H100-80GB-HBM3/gemv-2026-12-07/): columns in blocks of 4 and K in chunks of 512
    on two warps for every layer projection (qkv, o, gate_up, down: 3.4-5.0 us against the skinny
    GEMM's 4.8-6.8); a vocabulary-sized N in blocks of 32 on eight warps."""
    if n >= 65536:
        return GemvLaunch(block_n=32, block_k=256, num_warps=8, num_stages=3)
    return GemvLaunch(block_n=4, block_k=512 if k >= 512 else 128, num_warps=2, num_stages=3)


if triton is not None:

    @triton.jit
    def _w(W, rn, kk, N, s_wn, K: tl.constexpr, EVEN: tl.constexpr):
        return _load_w(W, rn, kk, N, s_wn, K, EVEN).to(tl.float32)

    @triton.jit
    def _x(X, D, NW, Y, kk, inv, K: tl.constexpr, NORM: tl.constexpr, HAS_RES: tl.constexpr):
        """Chunk `kk` of the input in float32: X's; with NORM the add_rms_norm of X (+ D) by NW,
        rounded to Y's dtype where that kernel rounds (the sum, the normalised value, the
        weight product)."""
        m = kk < K
        x = tl.load(X + kk, mask=m, other=0.0).to(tl.float32)
        if NORM:
            dt = Y.dtype.element_ty
            if HAS_RES:
                x = (x + tl.load(D + kk, mask=m, other=0.0).to(tl.float32)).to(dt).to(tl.float32)
            n = (x * inv).to(dt).to(tl.float32)
            x = (tl.load(NW + kk, mask=m, other=0.0).to(tl.float32) * n).to(dt).to(tl.float32)
        return x

    @triton.jit
    def _inv_rms(X, D, HO, eps, K: tl.constexpr, KB: tl.constexpr, HAS_RES: tl.constexpr):
        """The whole row's inverse RMS (of X + D, which program 0 stores to HO, rounded)."""
        c = tl.arange(0, KB)
        m = c < K
        h = tl.load(X + c, mask=m, other=0.0).to(tl.float32)
        if HAS_RES:
            hq = (h + tl.load(D + c, mask=m, other=0.0).to(tl.float32)).to(HO.dtype.element_ty)
            tl.store(HO + c, hq, mask=m & (tl.program_id(0) == 0))
            h = hq.to(tl.float32)
        return 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / K + eps)

    @triton.jit
    def _gemv_kernel(
        X,
        D,
        NW,
        HO,
        W,
        Y,
        N,
        s_wn,
        eps,
        K: tl.constexpr,
        KB: tl.constexpr,
        BN: tl.constexpr,
        BK: tl.constexpr,
        EVEN: tl.constexpr,
        GLU: tl.constexpr,
        NORM: tl.constexpr,
        HAS_RES: tl.constexpr,
        PRE: tl.constexpr,
        PDL: tl.constexpr,
    ):
        # GLU: W holds 2N rows (gate, then up); Y = silu(x @ gate.T) * (x @ up.T)
        # NORM: x = add_rms_norm(X (+ D), NW) (norm_gemv), computed whole by every program
        # PRE: weight chunks loaded before the wait (1, or 2 where K >= 2 BK)
        rn = tl.program_id(0) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        w = _w(W, rn, rk, N, s_wn, K, EVEN)  # the first chunks: constant, so before the wait
        if GLU:
            wu = _w(W + N * s_wn, rn, rk, N, s_wn, K, EVEN)
        if PRE == 2:
            w2 = _w(W, rn, BK + rk, N, s_wn, K, EVEN)
            if GLU:
                wu2 = _w(W + N * s_wn, rn, BK + rk, N, s_wn, K, EVEN)
        if PDL:
            gdc_wait()
            gdc_launch_dependents()
        inv = 1.0
        if NORM:
            inv = _inv_rms(X, D, HO, eps, K, KB, HAS_RES)
        x = _x(X, D, NW, Y, rk, inv, K, NORM, HAS_RES)[None, :]
        acc = w * x
        if GLU:
            acc_u = wu * x
        if PRE == 2:
            x = _x(X, D, NW, Y, BK + rk, inv, K, NORM, HAS_RES)[None, :]
            acc += w2 * x
            if GLU:
                acc_u += wu2 * x
        for k0 in range(PRE * BK, K, BK):
            kk = k0 + rk
            x = _x(X, D, NW, Y, kk, inv, K, NORM, HAS_RES)[None, :]
            acc += _w(W, rn, kk, N, s_wn, K, EVEN) * x
            if GLU:
                acc_u += _w(W + N * s_wn, rn, kk, N, s_wn, K, EVEN) * x
        y = tl.sum(acc, axis=1)
        if GLU:
            g = y.to(Y.dtype.element_ty).to(tl.float32)
            s = (g / (1.0 + tl.exp(-g))).to(Y.dtype.element_ty).to(tl.float32)
            y = s * tl.sum(acc_u, axis=1).to(Y.dtype.element_ty).to(tl.float32)
        tl.store(Y + rn, y.to(Y.dtype.element_ty), mask=rn < N)


def run(x, w, glu: bool, pdl: bool, launch: Launch | None = None, norm: tuple | None = None):
    """The kernel on x [1, K], unit stride along K, and w [N, K] likewise ([2N, K], gate rows then
    up rows, with `glu`), at `launch` (None: `launch_for`): (the input, y [1, N]); with `norm` =
    (delta | None, w_norm, eps), the input is add_rms_norm(x, delta, w_norm, eps)'s and the first
    output the new residual stream x + delta (x itself where delta is None)."""
    if x.shape[0] != 1 or x.stride(-1) != 1 or w.stride(-1) != 1 or x.shape[1] != w.shape[1]:
        raise ValueError(f"gemv takes one row: x {tuple(x.shape)}, w {tuple(w.shape)}")
    if glu and w.shape[0] % 2:
        raise ValueError(f"gemv: the gate_up weight has an odd number of rows ({w.shape[0]})")
    k, n = x.shape[1], w.shape[0] // 2 if glu else w.shape[0]
    lc = launch or launch_for(w.shape[0], k)
    y = torch.empty(1, n, dtype=x.dtype, device=x.device)
    delta, w_norm, eps = norm if norm is not None else (None, x, 0.0)
    ho = torch.empty_like(x) if delta is not None else x
    _gemv_kernel[(triton.cdiv(n, lc.block_n),)](
        x,
        delta if delta is not None else x,
        w_norm,
        ho,
        w,
        y,
        n,
        w.stride(0),
        eps,
        K=k,
        KB=triton.next_power_of_2(k),
        BN=lc.block_n,
        BK=lc.block_k,
        EVEN=n % lc.block_n == 0 and k % lc.block_k == 0,
        GLU=glu,
        NORM=norm is not None,
        HAS_RES=delta is not None,
        PRE=2 if getattr(lc, "prefetch", 1) == 2 and k >= 2 * lc.block_k else 1,
        PDL=pdl,
        num_warps=lc.num_warps,
        num_stages=lc.num_stages,
        **options(pdl),
    )
    return ho, y


def gemv(
    x: torch.Tensor, w: torch.Tensor, launch: Launch | None = None, pdl: bool = False
) -> torch.Tensor:
    """x [1, K], unit stride along K; w [N, K] likewise. Returns [1, N] in x's dtype."""
    return run(x, w, False, pdl, launch)[1]


def gemv_gate_up_silu(
    x: torch.Tensor, w: torch.Tensor, launch: Launch | None = None, pdl: bool = False
) -> torch.Tensor:
    """x [1, K]; w [2I, K] (gate rows, then up rows). Returns [1, I]; equals
    skinny_gemm.reference_gate_up_silu."""
    return run(x, w, True, pdl, launch)[1]


def self_check(
    device: torch.device,
    dtype: torch.dtype,
    shapes: list[tuple[int, int]],
    gate_up: tuple[int, int] | None = None,
    pdl: bool = False,
    tol: float = 1e-2,
) -> str | None:
    """Run both forms on this device at each (N, K) weight shape (and the gate_up shape) against
    the reference, launched as the engine will (`pdl`); None when all agree, else why not (the
    caller then keeps the skinny GEMM for one row)."""
    if not available():
        return "triton is not installed"
    cases = [(n, k, gemv, reference) for n, k in shapes]
    if gate_up is not None:
        cases.append((*gate_up, gemv_gate_up_silu, reference_gate_up_silu))
    return check_projections(device, dtype, cases, (1,), pdl, tol)
