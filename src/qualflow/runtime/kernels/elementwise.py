"""The row-wise fused kernels of one decoder layer, as Triton kernels (kernels.fused picks them or
their torch reference per call):
  - `add_rms_norm`: residual add and the next RMSNorm in one pass (or the RMSNorm alone);
  - `silu_mul`: SwiGLU's silu(gate) * up over the fused gate_up projection's output.

Each rounds where the torch reference (kernels.reference) rounds: the residual sum, the normalised
value before the weight, the weight product, silu before the product."""

from __future__ import annotations

import torch

from .pdl import gdc_launch_dependents, gdc_wait, options

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the reference runs
    triton = None


if triton is not None:

    @triton.jit
    def _add_rms_norm_kernel(
        H,
        R,
        W,
        HO,
        Y,
        C,
        eps,
        s_h,
        s_r,
        s_ho,
        s_y,
        HAS_RES: tl.constexpr,
        BLOCK: tl.constexpr,
        PDL: tl.constexpr,
    ):
        if PDL:
            gdc_wait()
            gdc_launch_dependents()
        row = tl.program_id(0).to(tl.int64)
        c = tl.arange(0, BLOCK)
        m = c < C
        h = tl.load(H + row * s_h + c, mask=m, other=0.0).to(tl.float32)
        if HAS_RES:
            r = tl.load(R + row * s_r + c, mask=m, other=0.0).to(tl.float32)
            hq = (h + r).to(HO.dtype.element_ty)  # the residual stream is stored rounded
            tl.store(HO + row * s_ho + c, hq, mask=m)
            h = hq.to(tl.float32)
        inv = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / C + eps)
        n = (h * inv).to(Y.dtype.element_ty).to(tl.float32)
        w = tl.load(W + c, mask=m, other=0.0).to(tl.float32)
        tl.store(Y + row * s_y + c, (w * n).to(Y.dtype.element_ty), mask=m)

    @triton.jit
    def _silu_mul_kernel(Y, O, I, s_y, s_o, BLOCK: tl.constexpr, PDL: tl.constexpr):
        if PDL:
            gdc_wait()
            gdc_launch_dependents()
        row = tl.program_id(0).to(tl.int64)
        c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        m = c < I
        g = tl.load(Y + row * s_y + c, mask=m, other=0.0).to(tl.float32)
        u = tl.load(Y + row * s_y + I + c, mask=m, other=0.0).to(tl.float32)
        s = (g / (1.0 + tl.exp(-g))).to(O.dtype.element_ty).to(tl.float32)
        tl.store(O + row * s_o + c, (s * u).to(O.dtype.element_ty), mask=m)


def tri_add_rms_norm(h, delta, w, eps: float, pdl: bool = False):
    N, C = h.shape
    y = torch.empty_like(h)
    ho = torch.empty_like(h) if delta is not None else h
    r = delta if delta is not None else h
    _add_rms_norm_kernel[(N,)](
        h,
        r,
        w,
        ho,
        y,
        C,
        eps,
        h.stride(0),
        r.stride(0),
        ho.stride(0),
        y.stride(0),
        HAS_RES=delta is not None,
        BLOCK=triton.next_power_of_2(C),
        PDL=pdl,
        **options(pdl),
    )
    return ho, y


def tri_silu_mul(y, pdl: bool = False):
    N, I = y.shape[0], y.shape[1] // 2
    o = torch.empty(N, I, dtype=y.dtype, device=y.device)
    block = min(1024, triton.next_power_of_2(I))
    _silu_mul_kernel[(N, triton.cdiv(I, block))](
        y, o, I, y.stride(0), o.stride(0), BLOCK=block, PDL=pdl, **options(pdl)
    )
    return o
