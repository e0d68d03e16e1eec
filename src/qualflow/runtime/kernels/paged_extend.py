"""Extend attention: the queries of a prefill step past position 0 (a prompt after its cached
prefix, a later chunk of a long prompt) over their sequences' whole context, read straight from the
paged pool through the block tables, as one Triton kernel and, with several context splits, a merge.

A step's queries are cut into tiles of at most `block_m` rows of one sequence (`tiles_for`). One
program per (tile, query head, split) runs an online softmax over its split of the keys its
queries may see (causal: a query at position p sees keys 0..p). Splitting the keys fills the GPU
when a step has few tiles: one cached turn of 576 new tokens is 9 tiles x 16 heads, 144 programs on
132 multiprocessors; flash attention's varlen kernel has no such split, and first needs the
context gathered out of the pool into one tensor per layer. With one split the programs write the
output; with several, each writes a partial output and its log-sum-exp, and `_merge_kernel` weighs
them. A tile's row count of 0 is padding (a captured step's fixed-size table); a sequence whose
context length is 0 attends to nothing and its rows are written as zeros (a captured step's pad
tokens). `reference` is the same computation in plain torch (CPU, tests); varlen_choice checks the
kernel against the varlen reference on the device at load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from . import paged_extend_kernels as kernels
from .paged_decode import available, runs_on

__all__ = ["Launch", "available", "paged_extend", "reference", "runs_on", "splits_for", "tiles_for"]


@dataclass(frozen=True)
class Launch:
    """Rows per tile, keys per inner step, and Triton's warps and pipeline stages."""

    block_m: int = 64
    block_n: int = 64
    num_warps: int = 4
    num_stages: int = 2


def tiles_for(q_lens, starts, block_m: int, seqs=None) -> np.ndarray:
    """[tiles, 4] int64 rows (sequence, first row in the step's queries, rows, position of that
    row): sequence i's q_lens[i] queries start at position starts[i] and follow sequence i - 1's
    in the packed step. `seqs`: the sequence index each entry names (default 0, 1, ...)."""
    out, row = [], 0
    for i, (n, start) in enumerate(zip(q_lens, starts)):
        seq = i if seqs is None else seqs[i]
        for r in range(0, n, block_m):
            out.append((seq, row + r, min(block_m, n - r), start + r))
        row += n
    return np.asarray(out, dtype=np.int64).reshape(-1, 4)


def max_tiles(tokens: int, sequences: int, block_m: int) -> int:
    """The most tiles a step of `tokens` queries in `sequences` sequences can need."""
    return tokens // block_m + sequences


def splits_for(tiles: int, heads: int, sms: int, most: int = 8) -> int:
    """Context splits for a step of `tiles` query tiles: of 1, 2, 4, ... `most`, the one whose
    waves of programs (two resident per multiprocessor) divided by the splits is least, the fewest
    splits of a tie. A program's time is about its keys, so 1 / splits of a tile's; a step's is its
    waves' (benchmarks/kernels/extend_tune.py: 9 tiles x 16 heads on 132 SMs, 144 programs, ran
    in 0.152 ms unsplit, 0.142 at 2 splits (288 programs: two waves), 0.123 at 4 and 0.128 at 8;
    16 tiles x 16 heads, 256 programs, in 0.079 ms unsplit and 0.099 at 2)."""
    slots, best, cost = 2 * sms, 1, float("inf")
    s = 1
    while s <= most:
        c = -(-tiles * heads * s // slots) / s
        if c < cost - 1e-9:
            best, cost = s, c
        s *= 2
    return best


def bucket_tiles(tokens: int, block_m: int) -> int:
    """The tiles a captured step of `tokens` (a token bucket) is counted as for its splits: a step
    replays the smallest bucket that holds it, so it fills between half and all of it."""
    return max(1, 3 * tokens // (4 * block_m))


def paged_extend(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    tiles: torch.Tensor,
    block_tables: torch.Tensor,
    ctx_lens: torch.Tensor,
    splits: int = 1,
    launch: Launch | None = None,
) -> torch.Tensor:
    """q [N, H, D]; k/v_cache [blocks, block_size, KV, D] (the step's new K/V already stored);
    tiles [T, 4] (`tiles_for`); block_tables [S, M]; ctx_lens [S] (a sequence's context: its
    positions 0 to its last query's). Every row of q must lie in one tile. Returns [N, H, D]."""
    launch = launch or Launch()
    N, H, D = q.shape
    _, BS, KV, _ = k_cache.shape
    block_n = min(launch.block_n, BS)
    if BS % block_n:
        raise ValueError(f"paged_extend: block size {BS} is not a multiple of {block_n}")
    out = torch.empty_like(q)
    part = torch.empty(splits, N, H, D, dtype=torch.float32, device=q.device) if splits > 1 else out
    lse = torch.empty(splits, N, H, dtype=torch.float32, device=q.device) if splits > 1 else out
    ps, ls = (part.stride(), lse.stride()) if splits > 1 else ((0, 0, 0, 0), (0, 0, 0))
    # the partials', the log-sum-exps' and the output's strides, as both kernels take them
    strides = (*ps[:3], *ls[:2], out.stride(0), out.stride(1))
    kernels._extend_kernel[(tiles.shape[0], H, splits)](
        q,
        k_cache,
        v_cache,
        tiles,
        block_tables,
        ctx_lens,
        part,
        lse,
        out,
        D**-0.5 * math.log2(math.e),
        q.stride(0),
        q.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        block_tables.stride(0),
        *strides,
        GROUP=H // KV,
        BS=BS,
        BLOCK_M=launch.block_m,
        BLOCK_N=block_n,
        D=D,
        SPLITS=splits,
        num_warps=launch.num_warps,
        num_stages=launch.num_stages,
    )
    if splits > 1:
        kernels._merge_kernel[(N,)](
            part,
            lse,
            out,
            *strides,
            H=H,
            H_PAD=1 << (H - 1).bit_length(),
            D=D,
            SPLITS=splits,
        )
    return out


def _split_ranges(kend: int, block_n: int, splits: int) -> list[tuple[int, int]]:
    """The key ranges of a tile's splits, as the kernel cuts them (whole blocks of `block_n`)."""
    nblk = -(-kend // block_n)
    per = -(-nblk // splits)
    return [
        (s * per * block_n, min((s + 1) * per * block_n, kend))
        for s in range(splits)
        if s * per < nblk
    ]


def reference(
    q, k_cache, v_cache, tiles, block_tables, ctx_lens, splits: int = 1, launch=None
) -> torch.Tensor:
    """`paged_extend` in plain torch, split and merged the same way (fp32 inside)."""
    launch = launch or Launch()
    N, H, D = q.shape
    BS, KV = k_cache.shape[1], k_cache.shape[2]
    out = torch.zeros_like(q)
    for seq, row0, rows, pos0 in tiles.tolist():
        kend = min(int(ctx_lens[seq]), pos0 + rows)
        if rows == 0 or kend == 0:
            continue
        blocks = block_tables[seq, : -(-kend // BS)].long()
        k = k_cache[blocks].flatten(0, 1)[:kend].float().repeat_interleave(H // KV, dim=1)
        v = v_cache[blocks].flatten(0, 1)[:kend].float().repeat_interleave(H // KV, dim=1)
        qt = q[row0 : row0 + rows].float()  # [rows, H, D]
        s = torch.einsum("rhd,khd->hrk", qt, k) * D**-0.5
        visible = torch.arange(kend)[None, :] <= torch.arange(pos0, pos0 + rows)[:, None]
        s = s.masked_fill(~visible.to(s.device), float("-inf"))
        parts, lses = [], []
        for lo, hi in _split_ranges(kend, min(launch.block_n, BS), splits):
            lse = torch.logsumexp(s[..., lo:hi], -1)  # [H, rows]; -inf where nothing is seen
            w = torch.exp(s[..., lo:hi] - lse.nan_to_num(neginf=0.0)[..., None])
            parts.append(torch.einsum("hrk,khd->hrd", w.nan_to_num(0.0), v[lo:hi]))
            lses.append(lse)
        weights = torch.softmax(torch.stack(lses), 0).nan_to_num(0.0)  # [splits, H, rows]
        o = (torch.stack(parts) * weights[..., None]).sum(0)  # [H, rows, D]
        out[row0 : row0 + rows] = o.transpose(0, 1).to(q.dtype)
    return out
