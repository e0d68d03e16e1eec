"""Batched sampling: greedy, temperature, top-k, top-p, per-request seeds. No host sync inside."""
from __future__ import annotations

import torch


def sample(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor,
           generators: list[torch.Generator | None], need_filter: bool, candidates: list[int] | None = None
           ) -> torch.Tensor:
    """logits [B, V] float32; temperature/top_p float [B], top_k int [B] (0 = off) on logits.device.
    Rows with temperature 0 are greedy. Sampling uses the exponential-race trick
    (argmax p / E, E ~ Exp(1)), which equals a multinomial draw and needs no host sync.
    `need_filter` is decided on the host from the requests' parameters: no tensor is read back here.
    `candidates` (each row's top-k, from the host, when every row has one): each row draws among its
    top-k tokens only (one top-k over the vocabulary instead of a sort, and noise for those tokens
    only). The distribution is the same: top-p still counts the whole vocabulary's probabilities. A
    seeded row's noise covers its own top-k, so its draw does not depend on the rows beside it."""
    greedy = logits.argmax(dim=-1)
    scaled = logits / temperature.clamp_min(1e-5)[:, None]
    if candidates:
        vals, idx = scaled.topk(min(max(candidates), scaled.shape[-1]), dim=-1)   # descending
        probs = (vals - scaled.logsumexp(dim=-1, keepdim=True)).exp()            # over the whole vocabulary
        vals = vals.masked_fill(_dropped(probs, top_k, top_p), float("-inf"))
        pick = _race(vals.softmax(dim=-1), generators, candidates)
        return torch.where(temperature == 0, greedy, idx.gather(1, pick[:, None])[:, 0])
    if need_filter:
        scaled = _filter_top_k_top_p(scaled, top_k, top_p)
    return torch.where(temperature == 0, greedy, _race(scaled.softmax(dim=-1), generators))


def _race(probs: torch.Tensor, generators: list[torch.Generator | None],
          widths: list[int] | None = None) -> torch.Tensor:
    """Per row, the index drawn from `probs` (argmax p / E): rows with a generator draw from it, the
    first `widths[i]` columns only where given (the rest has probability 0)."""
    noise = torch.empty_like(probs)
    shared = [i for i, g in enumerate(generators) if g is None]
    if shared:
        rows = torch.tensor(shared).to(probs.device, non_blocking=True)  # a list index would copy blocking
        noise.index_copy_(0, rows, torch.empty((len(shared), probs.shape[1]), device=probs.device).exponential_())
    for i, g in enumerate(generators):
        if g is not None:
            w = probs.shape[1] if widths is None else min(widths[i], probs.shape[1])
            noise[i, :w].exponential_(generator=g)
            noise[i, w:] = 1.0
    return (probs / noise).argmax(dim=-1)


def _dropped(sorted_probs: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Of probabilities sorted in descending order per row: the ranks beyond top-k (0: none), and
    those past the smallest prefix that reaches top-p."""
    ranks = torch.arange(sorted_probs.shape[-1], device=sorted_probs.device)[None, :]
    k = torch.where(top_k > 0, top_k, torch.full_like(top_k, sorted_probs.shape[-1]))
    drop = ranks >= k[:, None]
    return drop | ((sorted_probs.cumsum(dim=-1) - sorted_probs) >= top_p[:, None])   # keep the smallest set reaching top_p


def _filter_top_k_top_p(scaled: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    sorted_logits, idx = scaled.sort(dim=-1, descending=True)
    sorted_logits = sorted_logits.masked_fill(_dropped(sorted_logits.softmax(dim=-1), top_k, top_p), float("-inf"))
    return torch.empty_like(scaled).scatter_(-1, idx, sorted_logits)
