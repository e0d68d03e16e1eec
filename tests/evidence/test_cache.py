"""The prefix cache in the evidence: the trace's maximum and the hit rates."""

import json

import pandas as pd

from qualflow.evidence.cache import (
    cache_figures,
    cached_tokens_by_request,
    max_cached_shares,
    prompt_text,
)


def test_a_later_turn_holds_its_history_and_a_first_turn_nothing():
    t0 = {"input": [{"role": "user", "content": "hello"}]}
    t1 = {
        "input": t0["input"]
        + [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "x"}]
    }
    other = {"input": [{"role": "user", "content": "zzz"}]}
    shares = max_cached_shares({("a", 0): t0, ("a", 1): t1, ("b", 0): other})
    held = len(prompt_text(t0))
    assert shares[("a", 0)] == 0.0
    assert held / len(prompt_text(t1)) <= shares[("a", 1)] < 1.0
    assert shares[("b", 0)] < 0.5  # only the serialized empty tools and instructions are shared


def test_a_shared_system_prompt_is_held_across_sessions():
    a = {"instructions": "S" * 100, "input": [{"role": "user", "content": "a"}]}
    b = {"instructions": "S" * 100, "input": [{"role": "user", "content": "b"}]}
    assert max_cached_shares({("a", 0): a, ("b", 0): b})[("b", 0)] > 0.8


def test_cached_tokens_are_read_from_the_timing_log(tmp_path):
    log = tmp_path / "server_timing.jsonl"
    log.write_text(
        json.dumps({"request_id": "r1", "cached_tokens": 32})
        + "\n"
        + json.dumps({"request_id": "r2"})
        + "\n"
    )
    assert cached_tokens_by_request(log) == {"r1": 32}


def test_hit_rates_beside_the_maximum():
    samples = pd.DataFrame(
        {
            "server_input_tokens": [100, 300],
            "server_cached_tokens": [0, 240],
            "max_cached_share": [0.0, 0.9],
            "client_isl": [90, 290],
        }
    )
    fig = cache_figures(samples, {"overall_usage_prompt_cache_read_pct": {"avg": 60.0}})
    assert fig["cache_hit_rate"] == 240 / 400
    assert fig["aiperf_cache_hit_rate"] == 0.6
    assert abs(fig["max_cache_hit_rate"] - 270 / 400) < 1e-9
    none = cache_figures(samples.drop(columns=["server_cached_tokens"]), None)
    assert none["cache_hit_rate"] is None and none["aiperf_cache_hit_rate"] is None
