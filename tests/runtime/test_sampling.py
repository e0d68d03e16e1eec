"""Batched sampling (runtime.engine.sampling): drawing among each row's top-k candidates keeps the
distribution of filtering the whole sorted vocabulary (top-p counted over the whole vocabulary,
then renormalized), and the per-request generators stay reproducible."""
from __future__ import annotations

import torch

from qualflow.runtime.engine.sampling import sample

LOGITS = torch.tensor([2.0, 1.5, 1.0, 0.5, 0.0, -1.0, -3.0, 0.2])


def expected(top_k: int, top_p: float) -> torch.Tensor:
    """The specification by hand: the top_k most likely tokens, of those the smallest most-likely set
    whose whole-vocabulary probability reaches top_p, renormalized."""
    p = LOGITS.softmax(-1)
    order = p.argsort(descending=True)
    kept, mass = [], 0.0
    for rank, t in enumerate(order.tolist()):
        if rank >= top_k or mass >= top_p:
            break
        kept.append(t)
        mass += float(p[t])
    out = torch.zeros_like(p)
    out[kept] = p[kept] / p[kept].sum()
    return out


def frequencies(top_k: int, top_p: float, candidates: int, rows: int = 20000) -> torch.Tensor:
    """Draws of `rows` identical rows; `candidates` 0: through the sorted vocabulary, else that many per row."""
    torch.manual_seed(0)
    n = torch.full((rows,), 1.0)
    drawn = sample(LOGITS.repeat(rows, 1), n, torch.full((rows,), top_k), torch.full((rows,), top_p),
                   [None] * rows, need_filter=True,
                   candidates=[candidates] * rows if candidates else None)
    return torch.bincount(drawn, minlength=len(LOGITS)).float() / rows


def test_top_k_candidates_draw_the_filtered_distribution():
    for top_k, top_p in [(3, 1.0), (5, 0.7), (8, 0.5), (2, 0.99)]:
        want = expected(top_k, top_p)
        for candidates in (0, top_k, 8):   # the whole sorted vocabulary; exactly top-k; more than any row needs
            got = frequencies(top_k, top_p, candidates)
            assert torch.all(got[want == 0] == 0), (top_k, top_p, candidates, got)
            assert torch.allclose(got, want, atol=0.02), (top_k, top_p, candidates, got, want)


def test_rows_with_their_own_top_k_and_generators():
    """Rows of one batch keep their own top-k under the batch's largest, and a seeded row draws the
    same token alone as beside a row with a larger top-k."""
    logits = torch.randn(3, 1000, generator=torch.Generator().manual_seed(1))
    temps, top_p = torch.tensor([1.0, 1.0, 0.0]), torch.ones(3)
    top_k = torch.tensor([1, 50, 20])
    gens = [torch.Generator().manual_seed(s) for s in (5, 6, 7)]
    a = sample(logits, temps, top_k, top_p, gens, need_filter=True, candidates=[1, 50, 20])
    assert a[0] == logits[0].argmax() and a[2] == logits[2].argmax()      # top-k 1 and greedy
    assert a[1] in logits[1].topk(50).indices
    for row, seed in ((1, 6), (0, 5)):
        alone = sample(logits[row:row + 1], temps[row:row + 1], top_k[row:row + 1], top_p[row:row + 1],
                       [torch.Generator().manual_seed(seed)], need_filter=True, candidates=[int(top_k[row])])
        assert alone[0] == a[row]
    top_k[0] = 20   # row 0 now has top-k 20 beside row 1's 50: its draw is its own
    b = sample(logits, temps, top_k, top_p, [torch.Generator().manual_seed(s) for s in (5, 6, 7)],
               need_filter=True, candidates=[20, 50, 20])
    alone = sample(logits[0:1], temps[0:1], top_k[0:1], top_p[0:1], [torch.Generator().manual_seed(5)],
                   need_filter=True, candidates=[20])
    assert alone[0] == b[0] and b[1] == a[1]
