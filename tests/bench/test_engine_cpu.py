"""`qualflow bench engine` runs end to end on cpu on one tiny point: the result it writes is in the
results schema and carries the point's roofline share and its prefill step's host time, the
multi-turn point's sides (the cached turn's prefill padded, eager, gathered, and the cache off),
the agent-replay point's two and the plan's pair alternated (--paired-rounds)."""

from __future__ import annotations

import json

import pytest

from qualflow.bench import results
from qualflow.cli import main


def test_a_tiny_engine_run_writes_a_schema_result_with_the_roofline_share(tmp_path):
    out = tmp_path / "results"
    rc = main(
        [
            "bench",
            "engine",
            "--tiny",
            "--points",
            "c1_isl128_osl256",
            "--min-repeats",
            "1",
            "--min-seconds",
            "0.1",
            "--engine-process",
            "off",
            "--skip-equality",
            "--plan",
            "prefix",
            "--paired-rounds",
            "3",
            "--work",
            str(tmp_path / "work"),
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    [(path, rec)] = results.runs(out, kind="engine")  # read back through the schema's reader
    assert rec["schema"] == results.SCHEMA and rec["name"] == "prefix"
    pt, _ = rec["points"]  # the prefix cache on, then off
    assert pt["name"] == "c1_isl128_osl256_pc"
    limit = pt["roofline"]["output_tok_per_s"]
    assert limit > 0 and pt["share_of_roofline"] == pt["figures"]["output_tok_per_s"] / limit
    detail = json.loads(path.read_text())["detail"]["points"]["c1_isl128_osl256_pc"]
    assert detail["pct_of_roofline"] == pytest.approx(100 * pt["share_of_roofline"])
    # a c1 point's prefill step apart: its path and host time (no device time on the CPU)
    assert detail["prefill_step"]["paths"] and detail["prefill_step"]["host_ms_p50"] > 0
    assert detail["prefill_step"]["device_ms_p50"] is None
    # the multi-turn point: 6 turns, the last served mostly from the prefix cache when it is on
    mt = json.loads(path.read_text())["detail"]["multiturn"]
    assert mt["turns"] == 6 and mt["prompt_tokens"] == 64 + 5 * (24 + 8)
    assert all(x["cached_tokens"] == 0 for x in mt["off"]["last_turn"])
    # on: everything of the history but its last output token, in full blocks of 16
    assert all(x["cached_tokens"] == 192 for x in mt["on"]["last_turn"])
    assert mt["ttft_ratio_on_off"] == mt["on"]["ttft_ms_p50"] / mt["off"]["ttft_ms_p50"]
    assert all(
        x["cached_tokens"] == 192 for s in ("on_eager", "on_gather") for x in mt[s]["last_turn"]
    )
    # CPU gathers the context on every side; the on_gather side asks for it
    assert mt["on_gather"]["engine"]["extend_attention"] == "gather"
    assert (
        mt["on_gather"]["extend_attention"] == "gather"
        and mt["on"]["extend_attention"] != "paged-extend"
    )
    # the last turn's prefill: past its cached prefix, a padded step on, an eager one on_eager
    assert mt["on"]["last_prefill"]["paths"] == ["extend-graph"]
    assert mt["on_eager"]["last_prefill"]["paths"] == ["eager"]
    assert mt["off"]["last_prefill"]["paths"] == ["prefill-graph"]  # fresh, 224 tokens
    assert all(x["steps"][0]["tokens"] == 224 - 192 for x in mt["on"]["last_turn"])
    # the agent-replay point: recorded prompts, so the cache holds most of what the trace allows
    ag = json.loads(path.read_text())["detail"]["agent_replay"]
    assert ag["on"]["requests"] == ag["off"]["requests"] == 5 + 3  # its first 2 sessions
    assert ag["off"]["cached_tokens"] == 0 and ag["on"]["prompt_tokens"] > 2000
    assert 0.9 < ag["on"]["hit_share_of_max"] <= 1 and ag["on"]["max_hit_rate"] > 0.5
    assert ag["on"]["prefill_paths"].get("extend-graph", 0) > 0
    # --paired-rounds: the pair (cache off, on) loaded at once, the point alternated round by
    # round; the figure is the median of the rounds' ratios, each side's runs kept
    rec = json.loads(path.read_text())["detail"]["paired"]["c1_isl128_osl256_pc_vs_nopc"]
    base, test = rec["runs"]["_nopc"], rec["runs"]["_pc"]
    assert rec["rounds"] == len(base) == len(test) == 3 and min(base + test) > 0
    ratios = sorted(t / b for b, t in zip(base, test))
    assert rec["ratio"] == pytest.approx(ratios[1])
    assert (rec["ratio_min"], rec["ratio_max"]) == pytest.approx((ratios[0], ratios[2]))
