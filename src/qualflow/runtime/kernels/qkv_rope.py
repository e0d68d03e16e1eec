"""The attention input of a decode step at small batch as one Triton kernel: the qkv projection (the
skinny GEMM's way: the weight streamed once, the rows padded to one tensor-core tile), then, per
head, q/k RMSNorm and RoPE, and the store of k and v into the paged KV cache. It replaces the skinny
GEMM + `qk_norm_rope` pair of the fused layer path (kernels.fused) at steps of at most the skinny
rows: one kernel a layer fewer.

One program per head of the projection's output (q heads, then k heads, then v heads) computes the
head's D columns as two halves, since RoPE pairs column d with d + D/2. It rounds where the unfused
pair rounds: the product to the output dtype, the normalised value, the weight product, then the
rotation in fp32 rounded once (fused.ref_qk_norm_rope over the projection is its reference).
Launched with programmatic dependent launch (kernels.pdl), a program loads its first weight chunk
before it waits for the kernel before it."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from . import skinny_gemm
from .checks import agrees
from .destination import KvDestination
from .pdl import gdc_launch_dependents, gdc_wait, options
from .reference import ref_qk_norm_rope

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the unfused reference runs
    triton = None


@dataclass(frozen=True)
class Launch:
    block_k: int = 128
    num_warps: int = 4
    num_stages: int = 3


LAUNCH = Launch()   # benchmarks/qkv_rope_tune.py times a grid of others against it


if triton is not None:
    from .skinny_gemm import load_w, load_x

    @triton.jit
    def _rope_norm(lo, hi, W, c, rm, rmask, POS, COS, SIN, s_tab, eps, D: tl.constexpr, HALF: tl.constexpr,
                   DT: tl.constexpr):
        wl = tl.load(W + c).to(tl.float32)
        wh = tl.load(W + HALF + c).to(tl.float32)
        inv = 1.0 / tl.sqrt((tl.sum(lo * lo, 1) + tl.sum(hi * hi, 1)) / D + eps)
        nl = (wl[None, :] * (lo * inv[:, None]).to(DT).to(tl.float32)).to(DT).to(tl.float32)
        nh = (wh[None, :] * (hi * inv[:, None]).to(DT).to(tl.float32)).to(DT).to(tl.float32)
        tab = tl.load(POS + rm, mask=rmask, other=0).to(tl.int64)[:, None] * s_tab
        out_lo = nl * tl.load(COS + tab + c[None, :]) - nh * tl.load(SIN + tab + c[None, :])
        out_hi = nh * tl.load(COS + tab + HALF + c[None, :]) + nl * tl.load(SIN + tab + HALF + c[None, :])
        return out_lo.to(DT), out_hi.to(DT)

    @triton.jit
    def _store_halves(P, lo, hi, c, mask, HALF: tl.constexpr):
        tl.store(P + c[None, :], lo, mask=mask)
        tl.store(P + HALF + c[None, :], hi, mask=mask)

    @triton.jit
    def _qkv_rope_kernel(X, W, WQ, WK, COS, SIN, POS, QO, KO, VO, KC, VC, SLOT, M, eps,
                         s_xm, s_wn, s_tab, s_qo, s_qh, s_ko, s_kh, s_vo, s_vh, s_c, s_ch,
                         K: tl.constexpr, H: tl.constexpr, KV: tl.constexpr, D: tl.constexpr, BM: tl.constexpr,
                         BK: tl.constexpr, EVEN: tl.constexpr, STORE: tl.constexpr, PDL: tl.constexpr):
        j = tl.program_id(0)                        # [0, H) q heads, [H, H + KV) k heads, then v heads
        HALF: tl.constexpr = D // 2
        NW: tl.constexpr = (H + 2 * KV) * D
        c = tl.arange(0, HALF)
        rm = tl.arange(0, BM)
        rk = tl.arange(0, BK)
        rows = j * D + c
        w_lo = load_w(W, rows, rk, NW, s_wn, K, EVEN)       # constant: before the wait
        w_hi = load_w(W, rows + HALF, rk, NW, s_wn, K, EVEN)
        if PDL:
            gdc_wait()
            gdc_launch_dependents()
        x = load_x(X, rm, rk, M, s_xm, K)
        acc_lo = tl.dot(x, tl.trans(w_lo))
        acc_hi = tl.dot(x, tl.trans(w_hi))
        for k0 in range(BK, K, BK):
            kk = k0 + rk
            x = load_x(X, rm, kk, M, s_xm, K)
            acc_lo += tl.dot(x, tl.trans(load_w(W, rows, kk, NW, s_wn, K, EVEN)))
            acc_hi += tl.dot(x, tl.trans(load_w(W, rows + HALF, kk, NW, s_wn, K, EVEN)))
        DT: tl.constexpr = QO.dtype.element_ty
        lo = acc_lo.to(DT).to(tl.float32)
        hi = acc_hi.to(DT).to(tl.float32)
        rmask = rm < M
        mask = rmask[:, None]
        slot = tl.load(SLOT + rm, mask=rmask, other=0).to(tl.int64)
        if j < H:
            out_lo, out_hi = _rope_norm(lo, hi, WQ, c, rm, rmask, POS, COS, SIN, s_tab, eps, D, HALF, DT)
            _store_halves(QO + rm[:, None] * s_qo + j * s_qh, out_lo, out_hi, c, mask, HALF)
        elif j < H + KV:
            out_lo, out_hi = _rope_norm(lo, hi, WK, c, rm, rmask, POS, COS, SIN, s_tab, eps, D, HALF, DT)
            _store_halves(KO + rm[:, None] * s_ko + (j - H) * s_kh, out_lo, out_hi, c, mask, HALF)
            if STORE:
                _store_halves(KC + slot[:, None] * s_c + (j - H) * s_ch, out_lo, out_hi, c, mask, HALF)
        else:
            _store_halves(VO + rm[:, None] * s_vo + (j - H - KV) * s_vh, lo.to(DT), hi.to(DT), c, mask, HALF)
            if STORE:
                _store_halves(VC + slot[:, None] * s_c + (j - H - KV) * s_ch, lo.to(DT), hi.to(DT), c, mask, HALF)


def qkv_rope(x: torch.Tensor, w_qkv: torch.Tensor, w_qn: torch.Tensor, w_kn: torch.Tensor,
             rope: tuple[torch.Tensor, torch.Tensor], positions: torch.Tensor, heads: int, eps: float,
             dest: KvDestination | None = None, pdl: bool = False):
    """x [M, hidden], 1 <= M <= skinny_gemm.MAX_ROWS; w_qkv [(H + 2 KV) * D, hidden]; rope: the (cos, sin)
    tables [positions, D] (fp32). Returns q [M, H, D], k, v [M, KV, D]; k and v also stored at `dest`."""
    skinny_gemm.check_rows(x, w_qkv)
    (M, K), D = x.shape, w_qn.shape[0]
    kv_heads = (w_qkv.shape[0] // D - heads) // 2
    if (heads + 2 * kv_heads) * D != w_qkv.shape[0] or D & (D - 1) or D < 32:
        raise ValueError(f"qkv_rope: w_qkv {tuple(w_qkv.shape)} is not {heads} q heads and two equal k/v halves "
                         f"of {D} (a power of two, at least 32)")
    cos, sin = rope
    q = torch.empty(M, heads, D, dtype=x.dtype, device=x.device)
    k = torch.empty(M, kv_heads, D, dtype=x.dtype, device=x.device)
    v = torch.empty_like(k)
    kc, vc, slots = (dest.k_cache, dest.v_cache, dest.slots) if dest is not None else (k, v, positions)
    lc = LAUNCH
    _qkv_rope_kernel[(heads + 2 * kv_heads,)](
        x, w_qkv, w_qn, w_kn, cos, sin, positions, q, k, v, kc, vc, slots, M, eps,
        x.stride(0), w_qkv.stride(0), cos.stride(0), q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        v.stride(0), v.stride(1), kc.stride(0), kc.stride(1),
        K=K, H=heads, KV=kv_heads, D=D, BM=max(16, triton.next_power_of_2(M)), BK=lc.block_k,
        EVEN=K % lc.block_k == 0, STORE=dest is not None, PDL=pdl, num_warps=lc.num_warps,
        num_stages=lc.num_stages, **options(pdl))
    return q, k, v


def reference(x, w_qkv, w_qn, w_kn, rope, positions, heads: int, eps: float, dest: KvDestination | None = None):
    """The unfused pair: the projection, then ref_qk_norm_rope."""
    kv_heads = (w_qkv.shape[0] // w_qn.shape[0] - heads) // 2
    return ref_qk_norm_rope(torch.nn.functional.linear(x, w_qkv), w_qn, w_kn, *rope, positions, heads, kv_heads, eps,
                            dest)


def self_check(device: torch.device, dtype: torch.dtype, heads: int, kv_heads: int, head_dim: int, hidden: int,
               pdl: bool = False, tol: float = 1e-2) -> str | None:
    """Run the kernel on this device at the model's shapes, at 1, 5 and MAX_ROWS rows, with the K/V store,
    against the reference; None when all agree, else why not (the caller keeps the unfused pair)."""
    if triton is None:
        return "triton is not installed"
    g = torch.Generator(device=device).manual_seed(0)
    rnd = lambda *s: torch.randn(*s, device=device, generator=g)  # noqa: E731
    w = (rnd((heads + 2 * kv_heads) * head_dim, hidden) / hidden ** 0.5).to(dtype)
    wq, wk = rnd(head_dim).to(dtype), rnd(head_dim).to(dtype)
    ang = torch.rand(128, head_dim, device=device, generator=g) * 6.28
    rope = (ang.cos(), ang.sin())
    try:
        for m in (1, 5, skinny_gemm.MAX_ROWS):
            x = rnd(m, hidden).to(dtype)
            pos = torch.randint(0, 128, (m,), device=device, generator=g)
            slots = torch.randperm(2 * m, device=device, generator=g)[:m]
            outs = []
            for fn, extra in ((qkv_rope, (pdl,)), (reference, ())):
                kc = torch.zeros(2 * m, kv_heads, head_dim, device=device, dtype=dtype)
                vc = torch.zeros_like(kc)
                outs.append((*fn(x, w, wq, wk, rope, pos, heads, 1e-6, KvDestination(kc, vc, slots), *extra), kc, vc))
            if not all(agrees(a, b, tol) for a, b in zip(*outs)):
                return f"qkv_rope disagrees with the reference at {m} rows"
    except Exception as e:  # noqa: BLE001 - this build cannot compile or run the kernel
        return f"{type(e).__name__}: {e}"
    return None
