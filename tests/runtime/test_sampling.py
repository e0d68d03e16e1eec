"""Batched sampling (runtime.engine.sampling): the stop-token suppression and the sampler's rows,
and the fixed number of host-to-device copies per step whatever the batch size."""

from __future__ import annotations

import torch

from qualflow.runtime.api.request import SamplingParams
from qualflow.runtime.engine import sampling

V = 50


def _logits(b: int) -> torch.Tensor:
    return torch.randn(b, V, generator=torch.Generator().manual_seed(0))


def test_suppress_sets_only_the_named_tokens_of_the_named_rows():
    logits = _logits(4)
    before = logits.clone()
    sampling.suppress(logits, [0, 2], [(3, 7), (7,)])
    gone = torch.isinf(logits)
    assert gone.sum().item() == 3
    assert gone[0, 3] and gone[0, 7] and gone[2, 7]
    assert torch.equal(logits[~gone], before[~gone])


def test_greedy_rows_take_the_argmax_and_top_k_1_is_greedy():
    logits = _logits(3)
    params = [
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=1.0, top_k=1),
        SamplingParams(temperature=0.7, top_p=1e-6),
    ]
    toks = sampling.sample(logits, params, [None] * 3)
    assert toks.tolist() == logits.argmax(dim=-1).tolist()


def test_a_seeded_row_draws_the_same_in_any_batch():
    logits = _logits(5)
    params = [SamplingParams(temperature=1.0)] * 5

    def seeded(row: int) -> int:
        gens = [None] * 5
        gens[row] = torch.Generator().manual_seed(11)
        return sampling.sample(logits[:1].expand(5, V).clone(), params, gens)[row].item()

    alone = sampling.sample(
        logits[:1].clone(), params[:1], [torch.Generator().manual_seed(11)]
    ).item()
    assert seeded(0) == seeded(3) == alone


def test_a_step_copies_to_the_device_a_fixed_number_of_times(monkeypatch):
    """64 rows under min_tokens with temperature 1: one copy for the parameters and one for the
    suppressed tokens, not one or more per row."""
    calls = []
    real = sampling.to_device
    monkeypatch.setattr(sampling, "to_device", lambda *a, **k: calls.append(a) or real(*a, **k))
    logits = _logits(64)
    sampling.suppress(logits, list(range(64)), [(1, 2)] * 64)
    sampling.sample(logits, [SamplingParams(temperature=1.0, top_p=0.9)] * 64, [None] * 64)
    assert len(calls) == 2
    assert not torch.isin(
        sampling.sample(logits, [SamplingParams()] * 64, [None] * 64), torch.tensor([1, 2])
    ).any()


def test_a_greedy_batch_is_its_argmax_and_draws_no_noise(monkeypatch):
    """All rows greedy: the argmax, with no parameter copy and the device generator left as it
    was (no exponential noise drawn for rows that never use it)."""
    calls = []
    real = sampling.to_device
    monkeypatch.setattr(sampling, "to_device", lambda *a, **k: calls.append(a) or real(*a, **k))
    logits = _logits(8)
    state = torch.get_rng_state()
    got = sampling.sample(logits, [SamplingParams(temperature=0.0)] * 8, [None] * 8)
    assert torch.equal(got, logits.argmax(dim=-1))
    assert calls == [] and torch.equal(torch.get_rng_state(), state)
