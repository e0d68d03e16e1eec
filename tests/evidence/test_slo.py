"""SLOs judged from the joined evidence (the `slo-met` rung), repeats as their own runs with a CI
across them, max load meeting the SLO, and the AIPerf flags of rate / prompt-file / goodput
points."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fixtures import REPO
from fixtures.sessions import POINT, join, make_session, server_record
from qualflow.aiperf.command import AiperfPoint, build_command
from qualflow.aiperf.options import ClientOptions
from qualflow.aiperf.runner import Progress
from qualflow.evidence import slo, store
from qualflow.phases import aiperf_tag, parse_point_key, point_key

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def _join(tmp_path, s, slos, points=(POINT,)):
    return join(tmp_path, s, points, slos)


def test_slo_names_are_one_vocabulary():
    sch = yaml.safe_load(SCHEMA.read_text())["$defs"]["slo"]["properties"]
    assert tuple(sch) == slo.SLO_NAMES
    assert set(sch["goodput"]["properties"]) - {"min_fraction"} == set(slo.GOODPUT_BOUNDS)


def test_an_impossible_slo_stops_below_slo_met_naming_the_metric(tmp_path):
    s, _ = make_session(tmp_path)
    res, ev = _join(tmp_path, s, {"tiny_c2": {"ttft_ms": {"p50": 0.001}, "min_output_tps": 1}})
    assert res["statuses"] == {"tiny_c2": "aiperf-qualified"}
    why = ev["runs"].iloc[0]["status_reasons"]
    assert "SLO ttft_ms.p50 missed: client_ttft_ms_p50 <= 0.001 ms required, measured 20 ms" in why
    assert "min_output_tps" not in why  # the one that holds is not a reason
    t = ev["targets"].set_index("slo")
    assert not t.loc["ttft_ms.p50", "met"] and t.loc["min_output_tps", "met"]


def test_loose_slos_reach_slo_met_and_no_slo_stays_below(tmp_path):
    s, _ = make_session(tmp_path)
    loose = {
        "ttft_ms": {"p50": 1000, "p99": 5000},
        "itl_ms": {"p50": 100},
        "task_call_wall_ms": {"p99": 1000},
        "max_error_rate": 0,
        "goodput": {"min_fraction": 1.0, "ttft_ms": 1000},
    }
    res, ev = _join(tmp_path, s, {"tiny_c2": loose})
    assert res["statuses"] == {"tiny_c2": "slo-met"}, ev["runs"].iloc[0]["status_reasons"]
    assert ev["summary"].iloc[0]["goodput_fraction"] == 1.0
    res, ev = _join(tmp_path, s, {})
    assert res["statuses"] == {"tiny_c2": "aiperf-qualified"}
    assert "no SLOs configured" in ev["runs"].iloc[0]["status_reasons"]


def _add_repeat(s: Path, k: int, ttft: float):
    """Repeat k of tiny_c2: a copy of repeat 1's AIPerf run with its own request ids and TTFT."""
    src, dst = s / "points" / "tiny_c2", s / "points" / point_key("tiny_c2", k)
    shutil.copytree(src, dst)
    jl = dst / "aiperf" / "profile_export.jsonl"
    recs = [json.loads(ln) for ln in jl.read_text().splitlines()]
    for r in recs:
        r["metadata"]["x_request_id"] = f"r{k}-" + r["metadata"]["x_request_id"]
        r["metrics"]["time_to_first_token"]["value"] = ttft
    jl.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = json.loads((dst / "aiperf" / "outputs.json").read_text())
    for o in out["data"]:
        o["x_request_id"] = f"r{k}-" + o["x_request_id"]
    (dst / "aiperf" / "outputs.json").write_text(json.dumps(out))
    with open(s / "server_timing.jsonl", "a") as f:
        for i, r in enumerate(recs):
            f.write(
                json.dumps(
                    server_record(
                        r["metadata"]["x_request_id"], aiperf_tag("tiny_c2", k), 200 * k + i
                    )
                )
                + "\n"
            )


def test_repeats_are_own_runs_with_a_ci_and_feed_the_store(tmp_path):
    s, _ = make_session(tmp_path)
    _add_repeat(s, 2, 22.0)
    _add_repeat(s, 3, 24.0)
    res, ev = _join(
        tmp_path, s, {"tiny_c2": {"ttft_ms": {"p50": 21}}}, points=[{**POINT, "repeats": 3}]
    )
    rid = res["run_id"]
    assert res["run_ids"] == [rid, f"{rid}.r2", f"{rid}.r3"]
    assert list(ev["summary"]["repeat"]) == [1, 2, 3] and set(ev["summary"]["n_matched"]) == {3}
    prof = ev["requests"][ev["requests"]["phase"] == "profiling"]
    assert prof.groupby("run_id").size().to_dict() == {rid: 3, f"{rid}.r2": 3, f"{rid}.r3": 3}
    assert (prof["match_status"] == "matched").all()
    t = ev["targets"].set_index("figure").loc["client_ttft_ms_p50"]
    assert t["n_repeats"] == 3 and t["mean"] == pytest.approx(22.0)
    assert t["ci_low"] < 22.0 < t["ci_high"] and json.loads(t["values"]) == [20.0, 22.0, 24.0]
    assert set(ev["runs"]["status"]) == {
        "aiperf-qualified"
    }  # mean 22 > 21: missed, on every repeat
    assert (
        "measured 22 ms, 95% CI [17.03, 26.97] over 3 repeats"
        in ev["runs"].iloc[0]["status_reasons"]
    )
    # three runs in the store, each standing alone (its own correctness and protocol rows)
    refs = store.resolve(str(tmp_path / "ev" / "history" / f"{rid}.r2"))
    assert [r.run_id for r in refs] == [f"{rid}.r2"]
    one = store.load(refs)
    assert len(one["runs"]) == 1 and len(one["correctness"]) == 1 and len(one["protocol"]) == 2
    assert sorted(p.name for p in (tmp_path / "ev" / "history").iterdir()) == [
        rid,
        f"{rid}.r2",
        f"{rid}.r3",
    ]


def test_judge_flags_a_marginal_pass_and_the_t_interval():
    b = slo.Bound("ttft_ms.p50", "client_ttft_ms_p50", "<=", 25.0, " ms")
    f = slo.judge(b, [20.0, 22.0, 24.0])
    assert f.met and f.marginal and f.reason is None  # mean 22 meets 25; the CI reaches 26.97
    assert slo.mean_ci([1.0]) == (1.0, None, None)
    g = slo.judge(
        slo.Bound("min_output_tps", "output_token_throughput_tps", ">=", 100.0, " tok/s"), [40.0]
    )
    assert not g.met and g.reason == (
        "SLO min_output_tps missed: output_token_throughput_tps >= 100 tok/s "
        "required, measured 40 tok/s"
    )


def test_max_load_meeting_the_slo_per_workload_and_load_kind():
    summ = pd.DataFrame(
        [
            {
                "run_id": "r",
                "model": "m",
                "profile": "p",
                "workload": "w",
                "point_id": f"w_c{c}",
                "load_kind": "concurrency",
                "concurrency": c,
                "request_rate": None,
                "repeat": 1,
            }
            for c in (1, 2, 4)
        ]
        + [
            {
                "run_id": "r",
                "model": "m",
                "profile": "p",
                "workload": "w",
                "point_id": f"w_r{q}",
                "load_kind": "request_rate",
                "concurrency": None,
                "request_rate": q,
                "repeat": 1,
            }
            for q in (0.5, 1.0)
        ]
    )
    status = {
        "w_c1": "slo-met",
        "w_c2": "slo-met",
        "w_c4": "aiperf-qualified",
        "w_r0.5": "aiperf-qualified",
        "w_r1.0": "aiperf-qualified",
    }
    runs = pd.DataFrame([{"run_id": "r", "point_id": k, "status": v} for k, v in status.items()])
    ml = slo.max_load_meeting(runs, summ, "slo-met").set_index("load_kind")
    assert (
        ml.loc["concurrency", "max_load_meeting_slo"] == 2
        and ml.loc["concurrency", "first_load_missing"] == 4
    )
    assert (
        pd.isna(ml.loc["request_rate", "max_load_meeting_slo"])
        and ml.loc["request_rate", "first_load_missing"] == 0.5
    )


def _flag(cmd, name):
    return cmd[cmd.index(name) + 1]


def test_rate_prompt_file_goodput_and_sampling_flags():
    p = AiperfPoint(
        point_id="chat_r2",
        workload="chat",
        concurrency=None,
        isl=None,
        osl=16,
        request_rate=2.0,
        arrival_pattern="poisson",
        input_file="workloads/prompts/chat-v1.jsonl",
        sampling={"temperature": 0.7, "top_p": 0.9},
        goodput={"ttft_ms": 200, "itl_ms": 20},
    )
    cmd = build_command(p, ClientOptions(url="u", model_name="m", tokenizer="t"), artifact_dir="a")
    assert _flag(cmd, "--request-rate") == "2" and _flag(cmd, "--request-rate-mode") == "poisson"
    assert "--concurrency" not in cmd and "--synthetic-input-tokens-mean" not in cmd
    assert _flag(cmd, "--input-file") == "workloads/prompts/chat-v1.jsonl"
    assert _flag(cmd, "--custom-dataset-type") == "single_turn"
    assert _flag(cmd, "--goodput") == "inter_token_latency:20 time_to_first_token:200"
    extra = json.loads(_flag(cmd, "--extra-inputs"))
    assert extra["temperature"] == 0.7 and extra["top_p"] == 0.9 and extra["store"] is False
    with pytest.raises(ValueError, match="exactly one of isl"):
        build_command(
            AiperfPoint(point_id="x", concurrency=1, isl=8, osl=4, input_file="f"),
            ClientOptions(url="u", model_name="m", tokenizer="t"),
            artifact_dir="a",
        )


def test_point_keys_and_progress_lines(capsys):
    assert point_key("tiny_c2", 1) == "tiny_c2" and parse_point_key(point_key("tiny_r0p5", 3)) == (
        "tiny_r0p5",
        3,
    )
    assert parse_point_key("tiny_c2") == ("tiny_c2", 1)
    pr = Progress("tiny_c2 repeat 1/3", 20, start=0.0, every_s=5.0)
    assert pr.tick(lambda: 5, now=2.0) is None  # not yet
    assert (
        pr.tick(lambda: 5, now=10.0)
        == "progress tiny_c2 repeat 1/3: 5/20 requests, elapsed 10s, ETA 30s"
    )
    assert "5/20 requests" in capsys.readouterr().out
