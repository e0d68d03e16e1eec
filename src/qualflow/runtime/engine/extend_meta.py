"""The host side of the extend kernel (kernels.paged_extend) for a prefill step past position 0:
the query tiles, the sequences' block tables and context lengths, as numpy arrays, for an eager
step (`eager_extend`) or padded to a captured step's fixed shapes (`padded_extend`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels.paged_extend import max_tiles, tiles_for
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
    context / block_size blocks, and `max_tiles` tiles (the rest of 0 rows)."""
    n = sum(batch.counts)
    tiles = np.zeros((max_tiles(tokens, max_seqs + 1, block_m), 4), np.int64)
    seqs = list(range(len(batch.seqs))) + [max_seqs]
    real = tiles_for(list(batch.counts) + [tokens - n], list(batch.starts) + [0], block_m, seqs)
    tiles[: len(real)] = real
    tables = np.zeros((max_seqs + 1, context // block_size), np.int64)
    ctx = np.zeros(max_seqs + 1, np.int64)
    for i, (seq, start, c) in enumerate(zip(batch.seqs, batch.starts, batch.counts)):
        ctx[i] = start + c
        used = -(-ctx[i] // block_size)  # the blocks its context covers; the table may hold more
        tables[i, :used] = seq.block_table[:used]
    return ExtendTables(tiles, tables, ctx)
