"""Decode attention that reads the block table itself (flash-decoding over the paged pool), as two
Triton kernels: one program per (sequence, kv head, context split) runs an online softmax over its
share of the sequence's blocks for all the query heads of its group; a second merges the splits.
No host sync and no data-dependent shapes, so it is captured inside the decode CUDA graph.
`reference` is the same computation in plain torch (tests)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the paged path is not used there
    triton = None


def available() -> bool:
    return triton is not None


def splits_for(batch: int, kv_heads: int, sms: int = 132) -> int:
    """Context partitions so that a step has about two programs per multiprocessor."""
    s = 1
    while batch * kv_heads * s < 2 * sms and s < 16:
        s *= 2
    return s


if triton is not None:
    @triton.jit
    def _split_kernel(Q, K, V, BT, CL, O, LSE, scale,
                      s_qb, s_qh, s_kb, s_kt, s_kh, s_btb, s_ob, s_oh, s_os, s_lb, s_lh,
                      GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, BLOCK: tl.constexpr, D: tl.constexpr,
                      SPLITS: tl.constexpr):
        b = tl.program_id(0)
        kvh = tl.program_id(1)
        sp = tl.program_id(2)
        ctx = tl.load(CL + b)
        nblocks = tl.cdiv(ctx, BLOCK)
        per = tl.cdiv(nblocks, SPLITS)
        start = sp * per
        end = tl.minimum(start + per, nblocks)
        g = tl.arange(0, GROUP_PAD)
        d = tl.arange(0, D)
        t = tl.arange(0, BLOCK)
        hq = kvh * GROUP + g
        gmask = g < GROUP
        q = tl.load(Q + b * s_qb + hq[:, None] * s_qh + d[None, :], mask=gmask[:, None], other=0.0)
        m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
        l_i = tl.zeros([GROUP_PAD], tl.float32)
        acc = tl.zeros([GROUP_PAD, D], tl.float32)
        for j in range(start, end):
            blk = tl.load(BT + b * s_btb + j).to(tl.int64)
            off = blk * s_kb + t[:, None] * s_kt + kvh * s_kh + d[None, :]
            k = tl.load(K + off)
            v = tl.load(V + off)
            qk = tl.dot(q, tl.trans(k)) * scale
            qk = tl.where((j * BLOCK + t)[None, :] < ctx, qk, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            p = tl.exp(qk - m_new[:, None])
            alpha = tl.exp(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        has = l_i > 0
        out = acc / tl.where(has, l_i, 1.0)[:, None]
        lse = tl.where(has, m_i + tl.log(tl.where(has, l_i, 1.0)), float("-inf"))
        tl.store(O + b * s_ob + hq[:, None] * s_oh + sp * s_os + d[None, :], out, mask=gmask[:, None])
        tl.store(LSE + b * s_lb + hq * s_lh + sp, lse, mask=gmask)

    @triton.jit
    def _merge_kernel(O, LSE, OUT, s_ob, s_oh, s_os, s_lb, s_lh, s_xb, s_xh,
                      D: tl.constexpr, SPLITS: tl.constexpr):
        b = tl.program_id(0)
        h = tl.program_id(1)
        s = tl.arange(0, SPLITS)
        d = tl.arange(0, D)
        lse = tl.load(LSE + b * s_lb + h * s_lh + s)
        mx = tl.max(lse, 0)
        w = tl.where(lse > float("-inf"), tl.exp(lse - mx), 0.0)
        o = tl.load(O + b * s_ob + h * s_oh + s[:, None] * s_os + d[None, :])
        res = tl.sum(o * w[:, None], 0) / tl.sum(w, 0)
        tl.store(OUT + b * s_xb + h * s_xh + d, res.to(OUT.dtype.element_ty))


@dataclass(frozen=True)
class Launch:
    """Triton's warps and pipeline stages for the split kernel. The defaults were measured against a
    grid on the H200 (benchmarks/paged_decode_tune.py): within 3 % of the grid's best at every decode
    shape of the 0.6B engine, and at the copy bandwidth for 64 sequences of 1,152 tokens."""
    num_warps: int = 4
    num_stages: int = 3


DEFAULT_LAUNCH = Launch()


def paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_tables: torch.Tensor,
                 ctx_lens: torch.Tensor, splits: int = 1, launch: Launch = DEFAULT_LAUNCH) -> torch.Tensor:
    """q [B, H, D]; k/v_cache [blocks, block_size, KV, D]; block_tables [B, M] int32; ctx_lens [B] int32
    (>= 1, the query's own token included). Returns [B, H, D] in q's dtype."""
    B, H, D = q.shape
    _, BS, KV, _ = k_cache.shape
    group = H // KV
    part = torch.empty(B, H, splits, D, dtype=torch.float32, device=q.device)
    lse = torch.empty(B, H, splits, dtype=torch.float32, device=q.device)
    out = torch.empty_like(q)
    _split_kernel[(B, KV, splits)](
        q, k_cache, v_cache, block_tables, ctx_lens, part, lse, D ** -0.5,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), block_tables.stride(0),
        part.stride(0), part.stride(1), part.stride(2), lse.stride(0), lse.stride(1),
        GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)), BLOCK=BS, D=D, SPLITS=splits,
        num_warps=launch.num_warps, num_stages=launch.num_stages)
    _merge_kernel[(B, H)](part, lse, out, part.stride(0), part.stride(1), part.stride(2),
                          lse.stride(0), lse.stride(1), out.stride(0), out.stride(1), D=D, SPLITS=splits)
    return out


def reference(q, k_cache, v_cache, block_tables, ctx_lens) -> torch.Tensor:
    B, H, D = q.shape
    BS = k_cache.shape[1]
    out = torch.empty_like(q)
    for b in range(B):
        n = int(ctx_lens[b])
        blocks = block_tables[b, : -(-n // BS)].long()
        k = k_cache[blocks].flatten(0, 1)[:n].transpose(0, 1).float()  # [KV, n, D]
        v = v_cache[blocks].flatten(0, 1)[:n].transpose(0, 1).float()
        o = torch.nn.functional.scaled_dot_product_attention(q[b].float()[:, None], k, v, enable_gqa=True)
        out[b] = o[:, 0].to(q.dtype)
    return out
