"""The Triton kernels of extend attention (kernels.paged_extend launches them): `_extend_kernel`,
one program per (query tile, query head, context split), an online softmax over its split of the
keys the tile's queries may see, read from the pool through the sequence's block table;
`_merge_kernel`, one program per query row, the splits' partial outputs weighted by their
log-sum-exp. Scores are kept in base 2 (the scale folds in log2 e)."""

from __future__ import annotations

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the reference runs there
    triton = None

if triton is not None:

    @triton.jit
    def _extend_kernel(
        Q,
        K,
        V,
        TILES,
        BT,
        CTX,
        O,
        LSE,
        OUT,
        scale_log2,
        s_qn,
        s_qh,
        s_kb,
        s_kt,
        s_kh,
        s_bt,
        s_os,
        s_on,
        s_oh,
        s_ls,
        s_ln,
        s_xn,
        s_xh,
        GROUP: tl.constexpr,
        BS: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        D: tl.constexpr,
        SPLITS: tl.constexpr,
    ):
        # a tile: (sequence, first row in Q, rows, position of its first row); rows == 0: padding
        t = tl.program_id(0)
        h = tl.program_id(1)
        sp = tl.program_id(2)
        rows = tl.load(TILES + t * 4 + 2).to(tl.int32)
        if rows > 0:
            seq = tl.load(TILES + t * 4).to(tl.int64)
            row0 = tl.load(TILES + t * 4 + 1).to(tl.int64)
            pos0 = tl.load(TILES + t * 4 + 3).to(tl.int32)
            ctx = tl.load(CTX + seq).to(tl.int32)
            m = tl.arange(0, BLOCK_M)
            d = tl.arange(0, D)
            n = tl.arange(0, BLOCK_N)
            mmask = m < rows
            q = tl.load(
                Q + (row0 + m)[:, None] * s_qn + h * s_qh + d[None, :],
                mask=mmask[:, None],
                other=0.0,
            )
            qpos = pos0 + m
            kend = tl.minimum(ctx, pos0 + rows)  # no query of the tile sees a key past this
            nblk = tl.cdiv(kend, BLOCK_N)
            per = tl.cdiv(nblk, SPLITS)
            start = sp * per
            end = tl.minimum(start + per, nblk)
            kvh = h // GROUP
            m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
            l_i = tl.zeros([BLOCK_M], tl.float32)
            acc = tl.zeros([BLOCK_M, D], tl.float32)
            for jb in range(start, end):
                j0 = jb * BLOCK_N
                blk = tl.load(BT + seq * s_bt + j0 // BS).to(tl.int64)
                base = blk * s_kb + (j0 % BS) * s_kt + kvh * s_kh
                j = j0 + n
                kmask = j < kend
                kv_off = base + n[:, None] * s_kt + d[None, :]
                k = tl.load(K + kv_off, mask=kmask[:, None], other=0.0)
                s = tl.dot(q, tl.trans(k)) * scale_log2
                s = tl.where((j[None, :] <= qpos[:, None]) & kmask[None, :], s, float("-inf"))
                m_new = tl.maximum(m_i, tl.max(s, 1))
                m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
                p = tl.exp2(s - m_use[:, None])
                alpha = tl.exp2(m_i - m_use)
                l_i = l_i * alpha + tl.sum(p, 1)
                v = tl.load(V + kv_off, mask=kmask[:, None], other=0.0)
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
                m_i = m_new
            res = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
            if SPLITS == 1:
                tl.store(
                    OUT + (row0 + m)[:, None] * s_xn + h * s_xh + d[None, :],
                    res.to(OUT.dtype.element_ty),
                    mask=mmask[:, None],
                )
            else:
                tl.store(
                    O + sp * s_os + (row0 + m)[:, None] * s_on + h * s_oh + d[None, :],
                    res,
                    mask=mmask[:, None],
                )
                lse = tl.where(l_i > 0, m_i + tl.log2(tl.where(l_i > 0, l_i, 1.0)), float("-inf"))
                tl.store(LSE + sp * s_ls + (row0 + m) * s_ln + h, lse, mask=mmask)

    @triton.jit
    def _merge_kernel(
        O,
        LSE,
        OUT,
        s_os,
        s_on,
        s_oh,
        s_ls,
        s_ln,
        s_xn,
        s_xh,
        H: tl.constexpr,
        H_PAD: tl.constexpr,
        D: tl.constexpr,
        SPLITS: tl.constexpr,
    ):
        # one row, every head: the splits' partials weighted by 2^(lse - max); a row no split saw
        # (a padding token without context) is written as zeros
        r = tl.program_id(0).to(tl.int64)
        hh = tl.arange(0, H_PAD)
        d = tl.arange(0, D)
        hmask = hh < H
        mx = tl.full([H_PAD], float("-inf"), tl.float32)
        for sp in tl.static_range(SPLITS):
            ls = tl.load(LSE + sp * s_ls + r * s_ln + hh, mask=hmask, other=float("-inf"))
            mx = tl.maximum(mx, ls)
        mx = tl.where(mx == float("-inf"), 0.0, mx)
        acc = tl.zeros([H_PAD, D], tl.float32)
        den = tl.zeros([H_PAD], tl.float32)
        for sp in tl.static_range(SPLITS):
            ls = tl.load(LSE + sp * s_ls + r * s_ln + hh, mask=hmask, other=float("-inf"))
            w = tl.exp2(ls - mx)
            o = tl.load(
                O + sp * s_os + r * s_on + hh[:, None] * s_oh + d[None, :],
                mask=hmask[:, None] & (w[:, None] > 0),
                other=0.0,
            )
            acc += o * w[:, None]
            den += w
        res = acc / tl.where(den > 0, den, 1.0)[:, None]
        tl.store(
            OUT + r * s_xn + hh[:, None] * s_xh + d[None, :],
            res.to(OUT.dtype.element_ty),
            mask=hmask[:, None],
        )
