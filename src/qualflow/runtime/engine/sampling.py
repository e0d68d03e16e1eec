"""Batched sampling: greedy, temperature, top-k, top-p, per-request seeds, and the suppression of
stop tokens before min_tokens. No host sync inside, and a fixed number of host-to-device copies
per step whatever the batch size (one for the parameters, one for the suppressed tokens): a copy
per row cost the engine thread more host time per decode step at batch 64 than the step's GPU
time."""

from __future__ import annotations

import numpy as np
import torch

from ..api.request import SamplingParams
from .transfer import to_device


def suppress(logits: torch.Tensor, rows: list[int], token_ids: list[tuple[int, ...]]) -> None:
    """logits[row, t] = -inf for every t of token_ids[i], row = rows[i]: one copy and one kernel."""
    r = [row for row, ids in zip(rows, token_ids) for _ in ids]
    c = [t for ids in token_ids for t in ids]
    idx = to_device(np.array([r, c], np.int64), logits.device)
    logits.index_put_((idx[0], idx[1]), logits.new_full((), float("-inf")))


def sample(
    logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator | None]
) -> torch.Tensor:
    """The next token of each row of logits [B, V] (float32) under params[row]; rows with
    temperature 0 are greedy. Sampling uses the exponential-race trick (argmax p / E, E ~
    Exp(1)), which equals a multinomial draw and needs no host sync. Which steps run (top-k/top-p
    filtering, the greedy rows, seeded rows) is decided on the host from the parameters: no
    tensor is read back here. A batch of greedy rows only is one argmax: no parameter copy, no
    softmax, no noise drawn (at batch 1 the draw's nine kernels over the vocabulary are a visible
    share of the step)."""
    if all(p.temperature == 0 for p in params):
        return logits.argmax(dim=-1)
    host = np.array(
        [[p.temperature for p in params], [p.top_k for p in params], [p.top_p for p in params]],
        np.float32,
    )  # top_k as float32 is exact below 2^24
    dev = to_device(host, logits.device)
    temperature, top_k, top_p = dev[0], dev[1].long(), dev[2]
    scaled = logits / temperature.clamp_min(1e-5)[:, None]
    if any(p.top_k > 0 or p.top_p < 1 for p in params):
        scaled = _filter_top_k_top_p(scaled, top_k, top_p)
    probs = scaled.softmax(dim=-1)
    drawn = (probs / _exponential_noise(probs, generators)).argmax(dim=-1)
    if any(p.temperature == 0 for p in params):
        return torch.where(temperature == 0, logits.argmax(dim=-1), drawn)
    return drawn


def _exponential_noise(
    probs: torch.Tensor, generators: list[torch.Generator | None]
) -> torch.Tensor:
    """Exp(1) noise shaped like probs: a row with a generator draws from it (a seeded request
    draws the same whatever its batch), the others from the device's default generator in one
    call."""
    if all(g is None for g in generators):
        return torch.empty_like(probs).exponential_()
    noise = torch.empty_like(probs)
    shared = [i for i, g in enumerate(generators) if g is None]
    if shared:
        rows = to_device(shared, probs.device)
        noise.index_copy_(
            0, rows, torch.empty((len(shared), probs.shape[1]), device=probs.device).exponential_()
        )
    for i, g in enumerate(generators):
        if g is not None:
            noise[i].exponential_(generator=g)
    return noise


def _filter_top_k_top_p(
    scaled: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor
) -> torch.Tensor:
    sorted_logits, idx = scaled.sort(dim=-1, descending=True)
    V = scaled.shape[-1]
    ranks = torch.arange(V, device=scaled.device)[None, :]
    k = torch.where(top_k > 0, top_k, torch.full_like(top_k, V))
    drop = ranks >= k[:, None]
    cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    drop |= (cum - sorted_logits.softmax(dim=-1)) >= top_p[
        :, None
    ]  # keep the smallest set reaching top_p
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.empty_like(scaled).scatter_(-1, idx, sorted_logits)
