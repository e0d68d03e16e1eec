"""The q/k-norm + RoPE kernel of one decoder layer, as a Triton kernel (kernels.fused picks it or
its torch reference per call): per-head RMSNorm of q and k, RoPE (positions read from the cos/sin
tables directly) and, when given a destination, the store of k and v into the paged KV cache.
`QkTile` is how a launch splits a step; `qk_tile_for` picks it from the step's token count.

It computes as the torch reference (kernels.reference `ref_qk_norm_rope`) does: in float32 from the
projection's output to the rotated value, rounded once to the compute dtype."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .destination import KvDestination
from .pdl import gdc_launch_dependents, gdc_wait, options

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the reference runs
    triton = None


if triton is not None:

    @triton.jit
    def _qk_norm_rope_kernel(
        QKV,
        WQ,
        WK,
        COS,
        SIN,
        POS,
        QO,
        KO,
        VO,
        KC,
        VC,
        SLOT,
        eps,
        N,
        s_t,
        s_qo,
        s_qh,
        s_ko,
        s_kh,
        s_vo,
        s_vh,
        s_tab,
        s_c,
        s_ch,
        H: tl.constexpr,
        KV: tl.constexpr,
        D: tl.constexpr,
        BLOCK_T: tl.constexpr,
        STORE: tl.constexpr,
        PDL: tl.constexpr,
    ):
        # one program per BLOCK_T tokens and one head: heads [0, H) are q's, [H, H + KV) k's (with
        # v's copy). A head's two halves are loaded apart, so rotate-half is arithmetic on them, not
        # a gather.
        if PDL:
            gdc_wait()
            gdc_launch_dependents()
        t = tl.program_id(0).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)
        j = tl.program_id(1)
        h = tl.arange(0, D // 2)[None, :]
        live = t < N
        m = live[:, None]
        is_q, is_k = j < H, j >= H
        tc = t[:, None]
        row = QKV + tc * s_t + j * D + h  # q head j, or k head j - H: both at j * D
        x1 = tl.load(row, mask=m, other=0.0).to(tl.float32)
        x2 = tl.load(row + D // 2, mask=m, other=0.0).to(tl.float32)
        w1 = tl.where(is_q, tl.load(WQ + h).to(tl.float32), tl.load(WK + h).to(tl.float32))
        w2 = tl.where(
            is_q, tl.load(WQ + D // 2 + h).to(tl.float32), tl.load(WK + D // 2 + h).to(tl.float32)
        )
        inv = (1.0 / tl.sqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / D + eps))[
            :, None
        ]
        dt = QO.dtype.element_ty
        n1 = w1 * (x1 * inv)  # float32 to the end: one rounding, of the rotated value
        n2 = w2 * (x2 * inv)
        tab = tl.load(POS + t, mask=live, other=0).to(tl.int64)[:, None] * s_tab + h
        o1 = (n1 * tl.load(COS + tab, mask=m) - n2 * tl.load(SIN + tab, mask=m)).to(dt)
        o2 = (
            n2 * tl.load(COS + tab + D // 2, mask=m) + n1 * tl.load(SIN + tab + D // 2, mask=m)
        ).to(dt)
        qh = tl.minimum(j, H - 1)  # in-range pointers for the masked stores
        kvh = tl.maximum(j - H, 0)
        qo = QO + tc * s_qo + qh * s_qh + h
        tl.store(qo, o1, mask=m & is_q)
        tl.store(qo + D // 2, o2, mask=m & is_q)
        mk = m & is_k
        ko = KO + tc * s_ko + kvh * s_kh + h
        tl.store(ko, o1, mask=mk)
        tl.store(ko + D // 2, o2, mask=mk)
        vi = QKV + tc * s_t + (H + KV) * D + kvh * D + h
        v1 = tl.load(vi, mask=mk)
        v2 = tl.load(vi + D // 2, mask=mk)
        vo = VO + tc * s_vo + kvh * s_vh + h
        tl.store(vo, v1, mask=mk)
        tl.store(vo + D // 2, v2, mask=mk)
        if STORE:
            slot = tl.load(SLOT + t, mask=live, other=0).to(tl.int64)[:, None]
            kc = KC + slot * s_c + kvh * s_ch + h
            tl.store(kc, o1, mask=mk)
            tl.store(kc + D // 2, o2, mask=mk)
            vc = VC + slot * s_c + kvh * s_ch + h
            tl.store(vc, v1, mask=mk)
            tl.store(vc + D // 2, v2, mask=mk)


@dataclass(frozen=True)
class QkTile:
    """How `tri_qk_norm_rope` splits a step: tokens per program (each program one head of them) and
    warps per program."""

    block_t: int = 1
    num_warps: int = 1


def qk_tile_for(tokens: int) -> QkTile:
    """The tile for a step of `tokens` rows: below 128 rows (decode steps of fewer sequences) one
    token a program on one warp; from 128 on (prefill steps, large decode steps) tiles of 16
    tokens on four warps (one program per token and head is hundreds of thousands of programs at
    a full prefill budget, far from the op's bandwidth floor)."""
    return QkTile() if tokens < 128 else QkTile(16, 4)


def tri_qk_norm_rope(
    qkv,
    w_qn,
    w_kn,
    rope: tuple[torch.Tensor, torch.Tensor],
    positions,
    heads: int,
    eps: float,
    dest: KvDestination | None = None,
    pdl: bool = False,
    tile: QkTile | None = None,
):
    """ref_qk_norm_rope's computation; `rope` is its (cos_table, sin_table), the kv heads are
    what the qkv row holds beyond the q heads, `tile`: qk_tile_for's by default."""
    cos_table, sin_table = rope
    N, D = qkv.shape[0], w_qn.shape[0]
    kv_heads = (qkv.shape[1] // D - heads) // 2
    tile = tile or qk_tile_for(N)
    q = torch.empty(N, heads, D, dtype=qkv.dtype, device=qkv.device)
    k = torch.empty(N, kv_heads, D, dtype=qkv.dtype, device=qkv.device)
    v = torch.empty_like(k)
    kc, vc, slots = (
        (dest.k_cache, dest.v_cache, dest.slots) if dest is not None else (k, v, positions)
    )
    _qk_norm_rope_kernel[(triton.cdiv(N, tile.block_t), heads + kv_heads)](
        qkv,
        w_qn,
        w_kn,
        cos_table,
        sin_table,
        positions,
        q,
        k,
        v,
        kc,
        vc,
        slots,
        eps,
        N,
        qkv.stride(0),
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        v.stride(0),
        v.stride(1),
        cos_table.stride(0),
        kc.stride(0),
        kc.stride(1),
        H=heads,
        KV=kv_heads,
        D=D,
        BLOCK_T=tile.block_t,
        STORE=dest is not None,
        PDL=pdl,
        num_warps=tile.num_warps,
        **options(pdl),
    )
    return q, k, v
