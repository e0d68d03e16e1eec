"""Decode attention that reads the block table itself (flash-decoding over the paged pool), as one
Triton kernel: one program per (sequence, kv head, context split) runs an online softmax over its
share of the sequence's blocks for all the query heads of its group. With one split (a large batch)
it writes the output; with several (a small batch, so that the step fills the GPU) the last split to
finish merges the others' partial outputs, found by an arrival counter, so a layer's attention is
one launch, not two. No host sync and no data-dependent shapes, so it is captured inside the decode
CUDA graph.
`reference` is the same computation in plain torch (tests)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the paged path is not used there
    triton = None

from .pdl import gdc_launch_dependents, gdc_wait, options


def available() -> bool:
    return triton is not None


def runs_on(t: torch.Tensor) -> bool:
    """Whether the kernel can take `t`: a CUDA tensor, or any under Triton's interpreter
    (TRITON_INTERPRET=1, the tests). A CPU tensor where Triton is installed but not interpreting
    takes the reference (Triton finds no driver there)."""
    return available() and (t.is_cuda or os.environ.get("TRITON_INTERPRET") == "1")


def splits_for(batch: int, kv_heads: int, sms: int = 132) -> int:
    """Context partitions so that a step has about two programs per multiprocessor, at most 8: the
    merging program reads every split's partial, so beyond 8 more splits cost more than they gain
    (benchmarks/kernels/paged_decode_tune.py; its figures are in docs/performance.md)."""
    s = 1
    while batch * kv_heads * s < 2 * sms and s < 8:
        s *= 2
    return s


if triton is not None:

    @triton.jit
    def _merge_group(
        O,
        LSE,
        OUT,
        b,
        hq,
        gmask,
        d,
        s_ob,
        s_oh,
        s_os,
        s_lb,
        s_lh,
        s_xb,
        s_xh,
        GROUP_PAD: tl.constexpr,
        D: tl.constexpr,
        SPLITS: tl.constexpr,
    ):
        # the splits' partial outputs of one kv head's query heads, weighted by their log-sum-exp;
        # read past L1 (.cg): other programs wrote them
        lse = tl.load(
            LSE + b * s_lb + hq[:, None] * s_lh + tl.arange(0, SPLITS)[None, :],
            mask=gmask[:, None],
            other=float("-inf"),
            cache_modifier=".cg",
        )
        mx = tl.max(lse, 1)
        acc = tl.zeros([GROUP_PAD, D], tl.float32)
        den = tl.zeros([GROUP_PAD], tl.float32)
        for sp in tl.static_range(SPLITS):
            ls = tl.load(
                LSE + b * s_lb + hq * s_lh + sp,
                mask=gmask,
                other=float("-inf"),
                cache_modifier=".cg",
            )
            w = tl.where(ls > float("-inf"), tl.exp(ls - mx), 0.0)
            o = tl.load(
                O + b * s_ob + hq[:, None] * s_oh + sp * s_os + d[None, :],
                mask=gmask[:, None],
                other=0.0,
                cache_modifier=".cg",
            )
            acc += o * w[:, None]
            den += w
        res = acc / tl.where(gmask, den, 1.0)[:, None]
        tl.store(
            OUT + b * s_xb + hq[:, None] * s_xh + d[None, :],
            res.to(OUT.dtype.element_ty),
            mask=gmask[:, None],
        )

    @triton.jit
    def _split_kernel(
        Q,
        K,
        V,
        BT,
        CL,
        O,
        LSE,
        OUT,
        CNT,
        scale,
        s_qb,
        s_qh,
        s_kb,
        s_kt,
        s_kh,
        s_btb,
        s_ob,
        s_oh,
        s_os,
        s_lb,
        s_lh,
        s_xb,
        s_xh,
        GROUP: tl.constexpr,
        GROUP_PAD: tl.constexpr,
        BLOCK: tl.constexpr,
        D: tl.constexpr,
        SPLITS: tl.constexpr,
        MERGE_HERE: tl.constexpr,
        PDL: tl.constexpr,
    ):
        # SPLITS == 1: the output itself. Otherwise each split's partial output and log-sum-exp;
        # with MERGE_HERE the last split of a (sequence, kv head) to finish merges them (CNT counts
        # arrivals and is left at 0), else _merge_kernel does.
        if PDL:
            gdc_wait()
            gdc_launch_dependents()
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
        if SPLITS == 1:
            tl.store(
                OUT + b * s_xb + hq[:, None] * s_xh + d[None, :],
                out.to(OUT.dtype.element_ty),
                mask=gmask[:, None],
            )
        else:
            lse = tl.where(has, m_i + tl.log(tl.where(has, l_i, 1.0)), float("-inf"))
            tl.store(
                O + b * s_ob + hq[:, None] * s_oh + sp * s_os + d[None, :], out, mask=gmask[:, None]
            )
            tl.store(LSE + b * s_lb + hq * s_lh + sp, lse, mask=gmask)
            if MERGE_HERE:
                tl.debug_barrier()  # every thread's stores are issued before the release below
                arrived = tl.atomic_add(
                    CNT + b * tl.num_programs(1) + kvh, 1, sem="acq_rel", scope="gpu"
                )
                if arrived == SPLITS - 1:
                    _merge_group(
                        O,
                        LSE,
                        OUT,
                        b,
                        hq,
                        gmask,
                        d,
                        s_ob,
                        s_oh,
                        s_os,
                        s_lb,
                        s_lh,
                        s_xb,
                        s_xh,
                        GROUP_PAD,
                        D,
                        SPLITS,
                    )
                    tl.atomic_xchg(
                        CNT + b * tl.num_programs(1) + kvh, 0, sem="relaxed", scope="gpu"
                    )

    @triton.jit
    def _merge_kernel(
        O,
        LSE,
        OUT,
        s_ob,
        s_oh,
        s_os,
        s_lb,
        s_lh,
        s_xb,
        s_xh,
        D: tl.constexpr,
        SPLITS: tl.constexpr,
        PDL: tl.constexpr,
    ):
        if PDL:
            gdc_wait()
            gdc_launch_dependents()
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
    """Triton's warps and pipeline stages for the kernel."""

    num_warps: int = 4
    num_stages: int = 2


def launch_for(splits: int) -> Launch:
    """The settings a grid chose (benchmarks/kernels/paged_decode_tune.py, the one-kernel form;
    its figures are in docs/performance.md): near the grid's best at every decode shape of the
    0.6B engine. With several splits the merging program does more work, and eight warps do it
    faster."""
    return Launch(num_warps=8) if splits > 1 else Launch()


def paged_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    ctx_lens: torch.Tensor,
    splits: int = 1,
    launch: Launch | None = None,
    counters: torch.Tensor | None = None,
    pdl: bool = False,
) -> torch.Tensor:
    """q [B, H, D]; k/v_cache [blocks, block_size, KV, D]; block_tables [B, M] int32; ctx_lens [B]
    int32 (>= 1, the query's own token included). Returns [B, H, D] in q's dtype.

    One kernel: with one split its programs write the output; with several, the last split of
    each (sequence, kv head) merges them, counting arrivals in `counters` (int32, at least B *
    KV, zero, and left at zero: the caller keeps one across calls). Without `counters` a second
    kernel merges. `launch`: None for `launch_for(splits)`. `pdl`: launch with programmatic
    dependent launch (kernels.pdl)."""
    B, H, D = q.shape
    _, BS, KV, _ = k_cache.shape
    group = H // KV
    launch = launch or launch_for(splits)
    out = torch.empty_like(q)
    part = torch.empty(B, H, splits, D, dtype=torch.float32, device=q.device) if splits > 1 else out
    lse = (
        torch.empty(B, H, splits, dtype=torch.float32, device=q.device) if splits > 1 else ctx_lens
    )
    merge_here = splits > 1 and counters is not None
    if counters is not None and counters.numel() < B * KV:
        raise ValueError(
            f"paged_decode: {counters.numel()} counters for {B} x {KV} (sequence, kv head) pairs"
        )
    cnt = counters if merge_here else ctx_lens
    lse_s = lse.stride() if splits > 1 else (0, 0)
    _split_kernel[(B, KV, splits)](
        q,
        k_cache,
        v_cache,
        block_tables,
        ctx_lens,
        part,
        lse,
        out,
        cnt,
        D**-0.5,
        q.stride(0),
        q.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        block_tables.stride(0),
        part.stride(0),
        part.stride(1),
        part.stride(2) if splits > 1 else 0,
        lse_s[0],
        lse_s[1],
        out.stride(0),
        out.stride(1),
        GROUP=group,
        GROUP_PAD=max(16, triton.next_power_of_2(group)),
        BLOCK=BS,
        D=D,
        SPLITS=splits,
        MERGE_HERE=merge_here,
        PDL=pdl,
        num_warps=launch.num_warps,
        num_stages=launch.num_stages,
        **options(pdl),
    )
    if splits > 1 and not merge_here:
        _merge_kernel[(B, H)](
            part,
            lse,
            out,
            part.stride(0),
            part.stride(1),
            part.stride(2),
            lse.stride(0),
            lse.stride(1),
            out.stride(0),
            out.stride(1),
            D=D,
            SPLITS=splits,
            PDL=pdl,
            **options(pdl),
        )
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
        o = torch.nn.functional.scaled_dot_product_attention(
            q[b].float()[:, None], k, v, enable_gqa=True
        )
        out[b] = o[:, 0].to(q.dtype)
    return out
