"""The projections of a decode step at small batch (a few rows against a large weight): y = x @ w.T
as one Triton kernel that streams the weight once, the rows padded to one tensor-core tile (16, 32
or 64 rows). A step's projections at 1-16 rows are launch-latency bound (about the same time per
kernel whatever the weight), so the gain is in the shape of the kernel, not the bandwidth: cuBLAS
splits some of these shapes in two (the 0.6B's o projection at one row), and a vocabulary-sized
projection streams at the copy bandwidth (benchmarks/kernels/skinny_gemm_tune.py). Taking the
residual add and RMSNorm into the GEMM's prologue was measured too and was no faster than the fused
add_rms_norm kernel before it, so it is not here.

SwiGLU's gate_up projection runs as `skinny_gate_up_silu`: each program owns BLOCK_N columns of both
halves and writes silu(gate) * up, so the step has no separate silu_mul kernel and no [M, 2I]
intermediate.

Each program owns BLOCK_N output columns and walks K in BLOCK_K chunks; `launch_for` holds the
settings chosen by the tune. Launched with programmatic dependent launch (kernels.pdl), a program
loads its first weight chunk before it waits for the kernel before it. The torch reference is
`reference` (the CPU path, and what the kernel is checked against): the product accumulated in fp32
and rounded once to the output dtype."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .checks import check_projections
from .pdl import gdc_launch_dependents, gdc_wait, options

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the reference runs
    triton = None

MAX_ROWS = 64  # rows of one step, padded to a tile of 16, 32 or 64; larger steps go to cuBLAS


def available() -> bool:
    return triton is not None


@dataclass(frozen=True)
class Launch:
    block_n: int = 16
    block_k: int = 128
    num_warps: int = 2
    num_stages: int = 4


def launch_for(n: int, k: int) -> Launch:
    """Launch settings for an [N, K] weight, from the tune's grid (close to the grid's best for
    every projection of the 0.6B at 1-16 rows): K in chunks of 256 from 2,048 on, of 128 below;
    columns in blocks of 16, of 64 for a vocabulary-sized N."""
    return Launch(block_n=64 if n >= 65536 else 16, block_k=256 if k >= 2048 else 128)


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.linear(x, w)


def reference_gate_up_silu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up of the gate_up projection, rounded where the fused layer path rounds: the
    product, then silu, then the final product (fused.ref_silu_mul)."""
    gate, up = F.linear(x, w).chunk(2, dim=-1)
    return (F.silu(gate.float()).to(x.dtype).float() * up.float()).to(x.dtype)


if triton is not None:

    @triton.jit
    def _load_w(W, rn, kk, N, s_wn, K: tl.constexpr, EVEN: tl.constexpr):
        wp = W + rn[:, None] * s_wn + kk[None, :]
        if EVEN:
            w = tl.load(wp)
        else:
            w = tl.load(wp, mask=(rn[:, None] < N) & (kk[None, :] < K), other=0.0)
        return w

    @triton.jit
    def _load_x(X, rm, kk, M, s_xm, K: tl.constexpr):
        return tl.load(
            X + rm[:, None] * s_xm + kk[None, :],
            mask=(rm[:, None] < M) & (kk[None, :] < K),
            other=0.0,
        )

    @triton.jit
    def _skinny_kernel(
        X,
        W,
        Y,
        M,
        N,
        s_xm,
        s_wn,
        s_ym,
        K: tl.constexpr,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BK: tl.constexpr,
        EVEN: tl.constexpr,
        GLU: tl.constexpr,
        PDL: tl.constexpr,
    ):
        # GLU: W holds 2N rows (gate, then up); Y = silu(x @ gate.T) * (x @ up.T), each product
        # rounded to Y's dtype first, as the unfused GEMM + silu_mul round.
        rn = tl.program_id(0) * BN + tl.arange(0, BN)
        rm = tl.arange(0, BM)
        rk = tl.arange(0, BK)
        w = _load_w(
            W, rn, rk, N, s_wn, K, EVEN
        )  # the first weight chunk: constant, so before the wait
        if GLU:
            wu = _load_w(W + N * s_wn, rn, rk, N, s_wn, K, EVEN)
        if PDL:
            gdc_wait()
            gdc_launch_dependents()
        x = _load_x(X, rm, rk, M, s_xm, K)
        acc = tl.dot(x, tl.trans(w))
        if GLU:
            acc_u = tl.dot(x, tl.trans(wu))
        for k0 in range(BK, K, BK):
            kk = k0 + rk
            x = _load_x(X, rm, kk, M, s_xm, K)
            acc += tl.dot(x, tl.trans(_load_w(W, rn, kk, N, s_wn, K, EVEN)))
            if GLU:
                acc_u += tl.dot(x, tl.trans(_load_w(W + N * s_wn, rn, kk, N, s_wn, K, EVEN)))
        if GLU:
            g = acc.to(Y.dtype.element_ty).to(tl.float32)
            s = (g / (1.0 + tl.exp(-g))).to(Y.dtype.element_ty).to(tl.float32)
            acc = s * acc_u.to(Y.dtype.element_ty).to(tl.float32)
        tl.store(
            Y + rm[:, None] * s_ym + rn[None, :],
            acc.to(Y.dtype.element_ty),
            mask=(rm[:, None] < M) & (rn[None, :] < N),
        )


def check_rows(x: torch.Tensor, w: torch.Tensor) -> None:
    """Refuse what the skinny kernels cannot take: more than MAX_ROWS rows, or x and w that do
    not match."""
    if not 1 <= x.shape[0] <= MAX_ROWS:
        raise ValueError(f"skinny_gemm takes at most {MAX_ROWS} rows, got {x.shape[0]}")
    if x.stride(-1) != 1 or w.stride(-1) != 1 or x.shape[1] != w.shape[1]:
        raise ValueError(f"skinny_gemm: x {tuple(x.shape)} and w {tuple(w.shape)} do not match")


def _tiles(m: int, n: int, k: int, launch: Launch | None, pdl: bool) -> tuple[Launch, dict]:
    lc = launch or launch_for(n, k)
    return lc, dict(
        K=k,
        BM=max(16, triton.next_power_of_2(m)),
        BN=lc.block_n,
        BK=lc.block_k,
        EVEN=n % lc.block_n == 0 and k % lc.block_k == 0,
        num_warps=lc.num_warps,
        num_stages=lc.num_stages,
        PDL=pdl,
        **options(pdl),
    )


def skinny_gemm(
    x: torch.Tensor, w: torch.Tensor, launch: Launch | None = None, pdl: bool = False
) -> torch.Tensor:
    """x [M, K], 1 <= M <= MAX_ROWS, unit stride along K; w [N, K] likewise. Returns [M, N] in
    x's dtype. `pdl`: launch with programmatic dependent launch (kernels.pdl)."""
    check_rows(x, w)
    (M, K), N = x.shape, w.shape[0]
    lc, meta = _tiles(M, N, K, launch, pdl)
    y = torch.empty(M, N, dtype=x.dtype, device=x.device)
    _skinny_kernel[(triton.cdiv(N, lc.block_n),)](
        x, w, y, M, N, x.stride(0), w.stride(0), y.stride(0), GLU=False, **meta
    )
    return y


def skinny_gate_up_silu(
    x: torch.Tensor, w: torch.Tensor, launch: Launch | None = None, pdl: bool = False
) -> torch.Tensor:
    """SwiGLU's fused gate_up projection and silu(gate) * up in one kernel: x [M, K]; w [2I, K]
    (gate rows, then up rows). Returns [M, I]; equals `reference_gate_up_silu`."""
    check_rows(x, w)
    (M, K), N = x.shape, w.shape[0] // 2
    if w.shape[0] % 2:
        raise ValueError(f"skinny_gate_up_silu: w has an odd number of rows ({w.shape[0]})")
    lc, meta = _tiles(M, N, K, launch or launch_for(2 * N, K), pdl)
    y = torch.empty(M, N, dtype=x.dtype, device=x.device)
    _skinny_kernel[(triton.cdiv(N, lc.block_n),)](
        x, w, y, M, N, x.stride(0), w.stride(0), y.stride(0), GLU=True, **meta
    )
    return y


def self_check(
    device: torch.device,
    dtype: torch.dtype,
    shapes: list[tuple[int, int]],
    gate_up: tuple[int, int] | None = None,
    pdl: bool = False,
    tol: float = 1e-2,
) -> str | None:
    """Run the kernel on this device at each (N, K) weight shape, and the fused gate_up + SiLU
    form at the `gate_up` shape, at 1, 5 and MAX_ROWS rows against the reference, launched as the
    engine will (`pdl`); None when all agree, else why not (the caller then keeps torch's GEMM)."""
    if not available():
        return "triton is not installed"
    cases = [(n, k, skinny_gemm, reference) for n, k in shapes]
    if gate_up is not None:
        cases.append((*gate_up, skinny_gate_up_silu, reference_gate_up_silu))
    return check_projections(device, dtype, cases, (1, 5, MAX_ROWS), pdl, tol)
