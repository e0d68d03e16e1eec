"""The host side of the extend kernel (kernels.paged_extend) for a prefill step (past position 0, or
fresh where it takes those too): the query tiles, the sequences' block tables and context lengths,
as numpy arrays, for an eager step (`eager_extend`) or padded to a captured step's fixed shapes
(`padded_extend`), and the device buffers a captured step reads them from (`ExtendBuffers`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..kernels.attention import PagedAttention, StepMeta
from ..kernels.paged_extend import Launch, bucket_tiles, max_tiles, splits_for, tiles_for
from .scheduler import Batch


@dataclass(frozen=True)
class ExtendTables:
    tiles: np.ndarray  # [tiles, 4] int64 (paged_extend.tiles_for)
    tables: np.ndarray  # [sequences, blocks] int64
    ctx_lens: np.ndarray  # [sequences] int64: positions 0 to each sequence's last query


def eager_extend(batch: Batch, block_m: int) -> ExtendTables:
    """The step's tables, as long as its longest block table."""
    width = max(len(s.block_table) for s in batch.seqs)
    tables = np.zeros((len(batch.seqs), width), np.int64)
    for i, seq in enumerate(batch.seqs):
        tables[i, : len(seq.block_table)] = seq.block_table
    ctx = np.asarray([s + n for s, n in zip(batch.starts, batch.counts)], np.int64)
    return ExtendTables(tiles_for(list(batch.counts), list(batch.starts), block_m), tables, ctx)


def padded_extend(
    batch: Batch, tokens: int, context: int, max_seqs: int, block_size: int, block_m: int
) -> ExtendTables:
    """Padded to a captured step of `tokens` queries and `context` context rows: `max_seqs` + 1
    sequences (the last, of no context, holds the pad tokens after the real ones: zeros), tables of
    the blocks `context` rows take, and `max_tiles` tiles (the rest of 0 rows)."""
    n = sum(batch.counts)
    tiles = np.zeros((max_tiles(tokens, max_seqs + 1, block_m), 4), np.int64)
    seqs = list(range(len(batch.seqs))) + [max_seqs]
    real = tiles_for(list(batch.counts) + [tokens - n], list(batch.starts) + [0], block_m, seqs)
    tiles[: len(real)] = real
    tables = np.zeros((max_seqs + 1, -(-context // block_size)), np.int64)
    ctx = np.zeros(max_seqs + 1, np.int64)
    for i, (seq, start, c) in enumerate(zip(batch.seqs, batch.starts, batch.counts)):
        ctx[i] = start + c
        used = -(-ctx[i] // block_size)  # the blocks its context covers; the table may hold more
        tables[i, :used] = seq.block_table[:used]
    return ExtendTables(tiles, tables, ctx)


class ExtendBuffers:
    """A captured step's inputs to the extend kernel, at their largest: tiles for `max_tokens`
    queries, tables for `max_context` context rows, of `max_seqs` + 1 sequences."""

    def __init__(self, attn: PagedAttention, max_tokens: int, max_context: int, max_seqs: int):
        self.attn, self.max_seqs, self.block_m = attn, max_seqs, Launch().block_m
        dev, bs = attn.pool.device, attn.block_size
        z = lambda n: torch.zeros(n, dtype=torch.long, device=dev)  # noqa: E731
        self.tiles = z(max_tiles(max_tokens, max_seqs + 1, self.block_m) * 4).view(-1, 4)
        self.tables = z((max_seqs + 1) * -(-max_context // bs)).view(max_seqs + 1, -1)
        self.ctx_lens = z(max_seqs + 1)

    def meta(self, meta: StepMeta, tokens: int, context: int) -> StepMeta:
        """`meta` (a padded step of `tokens` queries, `context` context rows) reading these
        buffers; the context splits fixed by the token bucket."""
        meta.ctx_slots, meta.ctx_lens = None, self.ctx_lens
        meta.tiles = self.tiles[: max_tiles(tokens, self.max_seqs + 1, self.block_m)]
        meta.block_tables = self.tables[:, : -(-context // self.attn.block_size)]
        meta.splits = splits_for(bucket_tiles(tokens, self.block_m), self.attn.heads, self.attn.sms)
        return meta

    def host(self, batch: Batch, tokens: int, context: int) -> np.ndarray:
        """The step's padded tiles, tables and context lengths, flat: the part of the caller's
        one host buffer that `fill` reads back on the device."""
        e = padded_extend(batch, tokens, context, self.max_seqs, self.attn.block_size, self.block_m)
        return np.concatenate([e.tiles.reshape(-1), e.tables.reshape(-1), e.ctx_lens])

    def fill(self, src: torch.Tensor, tokens: int, context: int) -> None:
        """The buffers from `src`, the device copy of `host`'s array for the same step shape."""
        rows, seqs = max_tiles(tokens, self.max_seqs + 1, self.block_m), self.max_seqs + 1
        width = -(-context // self.attn.block_size)
        a, b = rows * 4, seqs * width
        self.tiles[:rows].copy_(src[:a].view(rows, 4))
        self.tables[:, :width].copy_(src[a : a + b].view(seqs, width))
        self.ctx_lens.copy_(src[a + b : a + b + seqs])
