"""The Triton kernels of paged decode attention (kernels.paged_decode launches them):
`_split_kernel`, one program per (sequence, kv head, context split), an online softmax over its
share of the sequence's blocks for all the query heads of its group, the last split to arrive
merging the others' partials (`_merge_group`) when it is given arrival counters; `_merge_kernel`,
the merge as a second kernel otherwise.

With ROPE_IN, `_split_kernel` reads the step's qkv projection row as it is and does the q/k-norm +
RoPE itself (`_normed_rotated`, the computation of kernels.qk_norm_rope): each program normalises
and rotates its group's query heads and its kv head's new key, takes the new key and value for the
query's own position from registers rather than the pool, and the program of split 0 stores them
at the row's slot, so a decode layer has no q/k-norm kernel before its attention."""

from __future__ import annotations

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the paged path is not used there
    triton = None

from .pdl import gdc_launch_dependents, gdc_wait

if triton is not None:

    @triton.jit
    def _normed_rotated(X, offs, mask, W, COS, SIN, tab, eps, D: tl.constexpr):
        # RMSNorm of each D-wide head at X + offs (offs [R, 1] or scalar) times W, then RoPE at the
        # cos/sin table row `tab`, in float32; rotate-half reads each element's partner half
        # (d + D/2 mod D) with a second load instead of a gather in registers
        d = tl.arange(0, D)
        dr = (d + D // 2) % D
        x = tl.load(X + offs + d, mask=mask, other=0.0).to(tl.float32)
        xr = tl.load(X + offs + dr, mask=mask, other=0.0).to(tl.float32)
        inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=-1, keep_dims=True) / D + eps)
        n = tl.load(W + d).to(tl.float32) * (x * inv)
        nr = tl.load(W + dr).to(tl.float32) * (xr * inv)
        sign = tl.where(d < D // 2, -1.0, 1.0)
        return n * tl.load(COS + tab + d) + (sign * nr) * tl.load(SIN + tab + d)

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
        WQ,
        WK,
        COS,
        SIN,
        POS,
        SLOT,
        eps,
        s_tab,
        GROUP: tl.constexpr,
        GROUP_PAD: tl.constexpr,
        BLOCK: tl.constexpr,
        D: tl.constexpr,
        SPLITS: tl.constexpr,
        MERGE_HERE: tl.constexpr,
        PDL: tl.constexpr,
        ROPE_IN: tl.constexpr,
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
        if ROPE_IN:  # Q is the qkv row: q heads, then k heads, then v heads, each D wide
            dt = K.dtype.element_ty
            row = Q + b * s_qb
            kv_heads = tl.num_programs(1)
            tab = tl.load(POS + b).to(tl.int64) * s_tab
            q = _normed_rotated(row, hq[:, None] * D, gmask[:, None], WQ, COS, SIN, tab, eps, D)
            q = q.to(dt)
            k_off = (GROUP * kv_heads + kvh) * D
            k_new = _normed_rotated(row, k_off, d < D, WK, COS, SIN, tab, eps, D).to(dt)
            v_new = tl.load(row + (GROUP * kv_heads + kv_heads + kvh) * D + d)
            if sp == 0:
                slot = tl.load(SLOT + b).to(tl.int64)
                at = (slot // BLOCK) * s_kb + (slot % BLOCK) * s_kt + kvh * s_kh + d
                tl.store(K + at, k_new)
                tl.store(V + at, v_new)
        else:
            q = tl.load(
                Q + b * s_qb + hq[:, None] * s_qh + d[None, :], mask=gmask[:, None], other=0.0
            )
        m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
        l_i = tl.zeros([GROUP_PAD], tl.float32)
        acc = tl.zeros([GROUP_PAD, D], tl.float32)
        for j in range(start, end):
            blk = tl.load(BT + b * s_btb + j).to(tl.int64)
            off = blk * s_kb + t[:, None] * s_kt + kvh * s_kh + d[None, :]
            k = tl.load(K + off)
            v = tl.load(V + off)
            if ROPE_IN:  # the query's own position: the new key and value, not the pool's slot
                own = ((j * BLOCK + t) == ctx - 1)[:, None]
                k = tl.where(own, k_new[None, :], k)
                v = tl.where(own, v_new[None, :], v)
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
