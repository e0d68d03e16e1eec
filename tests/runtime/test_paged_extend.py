"""The extend kernel's computation (kernels.paged_extend; its Triton kernel runs on CUDA, checked at
load by varlen_choice.choose_extend; here its torch reference, split and merged the same way) and
its host tables (engine.extend_meta): queries past position 0 attend to their whole context through
the block tables exactly as the gathered varlen reference does, for any context split; pad rows on
a sequence of no context come out as zeros."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from qualflow.runtime.engine.extend_meta import eager_extend, padded_extend
from qualflow.runtime.engine.scheduler import Batch
from qualflow.runtime.kernels import paged_extend
from qualflow.runtime.kernels.attention import varlen_sdpa
from qualflow.runtime.kernels.varlen_choice import extend_disagrees


def _case(starts, q_lens, heads=4, kv=2, d=16, block_size=8, pads=0, seed=0):
    """A pool whose blocks are shuffled across sequences, the step's queries (then `pads` rows),
    and the same context gathered for the varlen reference."""
    g = torch.Generator().manual_seed(seed)
    k_lens = [s + n for s, n in zip(starts, q_lens)]
    nb = [-(-k // block_size) for k in k_lens]
    kc = torch.randn(sum(nb) + 3, block_size, kv, d, generator=g)
    vc = torch.randn(sum(nb) + 3, block_size, kv, d, generator=g)
    order = torch.randperm(sum(nb) + 3, generator=g).tolist()
    tables = torch.zeros(len(starts) + 1, max(nb) + 2, dtype=torch.long)
    o = 0
    for i, n in enumerate(nb):
        tables[i, :n] = torch.tensor(order[o : o + n])
        o += n
    q = torch.randn(sum(q_lens) + pads, heads, d, generator=g)
    K = torch.cat([kc[tables[i, : nb[i]]].flatten(0, 1)[:k] for i, k in enumerate(k_lens)])
    V = torch.cat([vc[tables[i, : nb[i]]].flatten(0, 1)[:k] for i, k in enumerate(k_lens)])
    ref = varlen_sdpa(q[: sum(q_lens)], K, V, q_lens, k_lens)
    ctx = torch.tensor(k_lens + [0])  # the last sequence: the pads', no context
    return q, kc, vc, tables, ctx, ref


@pytest.mark.parametrize("splits", [1, 2, 3, 8])
@pytest.mark.parametrize("block_m", [4, 16])
def test_reference_equals_the_gathered_varlen_attention(splits, block_m):
    starts, q_lens = [37, 0, 5, 60], [20, 9, 41, 1]
    q, kc, vc, tables, ctx, ref = _case(starts, q_lens, pads=6)
    seqs = [0, 1, 2, 3, 4]
    tiles = paged_extend.tiles_for(q_lens + [6], starts + [0], block_m, seqs)
    tiles = np.concatenate([tiles, np.zeros((5, 4), np.int64)])  # padding tiles: 0 rows
    launch = paged_extend.Launch(block_m=block_m, block_n=8)
    out = paged_extend.reference(q, kc, vc, torch.from_numpy(tiles), tables, ctx, splits, launch)
    torch.testing.assert_close(out[:-6], ref, rtol=1e-5, atol=1e-5)
    assert out[-6:].eq(0).all()  # the pads: a sequence of no context


def test_tiles_splits_and_bounds():
    tiles = paged_extend.tiles_for([5, 0, 3], [10, 4, 0], 4)
    assert tiles.tolist() == [[0, 0, 4, 10], [0, 4, 1, 14], [2, 5, 3, 0]]
    assert paged_extend.tiles_for([3], [2], 4, seqs=[7]).tolist() == [[7, 0, 3, 2]]
    # a step of n tokens in s sequences never needs more than n // block_m + s tiles
    for counts in ([64], [63, 1], [1] * 16, [33, 31, 17]):
        n = sum(counts)
        assert len(paged_extend.tiles_for(counts, [0] * len(counts), 16)) <= (
            paged_extend.max_tiles(n, len(counts), 16)
        )
    # waves of two programs per SM, over the splits: the least, the fewest splits of a tie
    assert paged_extend.splits_for(9, 16, 132) == 8  # 144 programs: 1 wave, 5 waves / 8
    assert paged_extend.splits_for(4, 16, 132) == 4  # 64: 1/4 at 4 and 8, so 4
    assert paged_extend.splits_for(16, 16, 132) == 1  # 256 programs: one full wave already
    assert paged_extend.splits_for(40, 16, 132) == 2  # 640: 3 waves unsplit, 5 / 2 at 2
    assert paged_extend.splits_for(1, 16, 132, most=2) == 2
    assert paged_extend.bucket_tiles(1024, 64) == 12 and paged_extend.bucket_tiles(16, 64) == 1


class _Seq:
    def __init__(self, ids, table):
        self.token_ids, self.block_table = ids, table


def test_host_tables_eager_and_padded():
    # a: 6 cached tokens then 3 new, blocks [3, 5, 9]; b: 2 cached then 1, blocks [1, 2, 8]
    batch = Batch([_Seq([1] * 9, [3, 5, 9]), _Seq([1] * 3, [1, 2, 8])], [6, 2], [3, 1], [True] * 2)
    e = eager_extend(batch, block_m=2)
    assert e.tiles.tolist() == [[0, 0, 2, 6], [0, 2, 1, 8], [1, 3, 1, 2]]
    assert e.tables.tolist() == [[3, 5, 9], [1, 2, 8]] and e.ctx_lens.tolist() == [9, 3]
    p = padded_extend(batch, tokens=8, context=16, max_seqs=3, block_size=4, block_m=2)
    # the 4 pads after the 4 real tokens: tiles on sequence 3 (max_seqs), of no context
    assert (
        p.tiles.tolist()
        == [[0, 0, 2, 6], [0, 2, 1, 8], [1, 3, 1, 2], [3, 4, 2, 0], [3, 6, 2, 2]] + [[0] * 4] * 3
    )
    assert p.tables.tolist() == [[3, 5, 9, 0], [1, 0, 0, 0], [0] * 4, [0] * 4]  # blocks it covers
    assert p.ctx_lens.tolist() == [9, 3, 0, 0]


def test_the_load_check_takes_the_reference_and_refuses_a_wrong_kernel():
    pool = torch.zeros(4, 64, 2, 16)
    assert extend_disagrees(4, pool, 64, 132, run=paged_extend.reference) is None

    def rows_shifted(*args):  # each query row gets its neighbour's output
        return paged_extend.reference(*args).roll(1, dims=0)

    assert "disagrees with the reference" in extend_disagrees(4, pool, 64, 132, run=rows_shifted)
