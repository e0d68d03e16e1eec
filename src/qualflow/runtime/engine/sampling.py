"""Batched sampling: greedy, temperature, top-k, top-p, per-request seeds. No host sync inside."""
from __future__ import annotations

import torch


def sample(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor,
           generators: list[torch.Generator | None], need_filter: bool) -> torch.Tensor:
    """logits [B, V] float32; temperature/top_p float [B], top_k int [B] (0 = off) on logits.device.
    Rows with temperature 0 are greedy. Sampling uses the exponential-race trick
    (argmax p / E, E ~ Exp(1)), which equals a multinomial draw and needs no host sync.
    `need_filter` is decided on the host from the requests' parameters: no tensor is read back here."""
    greedy = logits.argmax(dim=-1)
    scaled = logits / temperature.clamp_min(1e-5)[:, None]
    if need_filter:
        scaled = _filter_top_k_top_p(scaled, top_k, top_p)
    probs = scaled.softmax(dim=-1)
    noise = torch.empty_like(probs)
    shared = [i for i, g in enumerate(generators) if g is None]
    if shared:
        rows = torch.tensor(shared).to(probs.device, non_blocking=True)  # a list index would copy blocking
        noise.index_copy_(0, rows, torch.empty((len(shared), probs.shape[1]), device=probs.device).exponential_())
    for i, g in enumerate(generators):
        if g is not None:
            noise[i].exponential_(generator=g)
    drawn = (probs / noise).argmax(dim=-1)
    return torch.where(temperature == 0, greedy, drawn)


def _filter_top_k_top_p(scaled: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    sorted_logits, idx = scaled.sort(dim=-1, descending=True)
    V = scaled.shape[-1]
    ranks = torch.arange(V, device=scaled.device)[None, :]
    k = torch.where(top_k > 0, top_k, torch.full_like(top_k, V))
    drop = ranks >= k[:, None]
    cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    drop |= (cum - sorted_logits.softmax(dim=-1)) >= top_p[:, None]  # keep the smallest set reaching top_p
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.empty_like(scaled).scatter_(-1, idx, sorted_logits)
