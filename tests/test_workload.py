"""qualflow.workload: a model's workloads expanded into points (ids, load labels, each point's SLO),
the invariants a workload keeps, the points a session runs, and `qualflow points`."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml

from fixtures import REPO
from qualflow.aiperf.command import AiperfPoint
from qualflow.cli import main
from qualflow.workload import (
    PointPlan,
    check_workload,
    load_label,
    plan_points,
    point_slo,
    request_settings,
    workload_points,
)

BASE = {"isl": 8, "osl": 8, "request_count": 2}


def test_load_labels_have_no_dot():
    assert load_label("concurrency", 8) == "c8"
    assert load_label("request_rate", 2) == "r2" and load_label("request_rate", 2.0) == "r2"
    assert load_label("request_rate", 0.5) == "r0p5" and load_label("request_rate", 1.25) == "r1p25"
    with pytest.raises(ValueError, match="load kind"):
        load_label("rate", 1)


def test_one_point_per_load_concurrencies_first_workloads_in_order():
    plan = plan_points(
        {
            "w2": {**BASE, "concurrency": [4, 1], "request_rate": [0.5]},
            "w1": {**BASE, "request_rate": [2]},
        }
    )
    assert [p.point_id for p in plan.points] == ["w2_c4", "w2_c1", "w2_r0p5", "w1_r2"]
    c4, _, r, _ = plan.points
    assert (c4.workload, c4.concurrency, c4.request_rate) == ("w2", 4, None)
    assert (r.workload, r.concurrency, r.request_rate) == ("w2", None, 0.5)
    assert set(plan.slos) == {p.point_id for p in plan.points}


def test_a_rate_point_is_capped_by_rate_max_concurrency_and_keeps_the_workload_settings():
    (c, r) = workload_points(
        "w",
        {
            **BASE,
            "concurrency": [2],
            "request_rate": [3],
            "rate_max_concurrency": 6,
            "arrival_pattern": "gamma",
            "seed": 7,
            "repeats": 3,
        },
    )
    assert c.concurrency == 2 and c.request_rate is None
    assert r.concurrency == 6 and r.request_rate == 3 and r.arrival_pattern == "gamma"
    assert r.seed == 7 and r.repeats == 3 and r.isl == 8 and r.request_count == 2


def test_prompt_file_points_have_no_isl():
    (p,) = workload_points(
        "chat", {"osl": 8, "request_count": 2, "concurrency": [1], "input_file": "f.jsonl"}
    )
    assert p.isl is None and p.input_file == "f.jsonl"


def test_goodput_bounds_go_to_the_points_without_min_fraction():
    wc = {
        **BASE,
        "concurrency": [1],
        "slo": {"goodput": {"min_fraction": 0.9, "ttft_ms": 100, "itl_ms": 5}},
    }
    (p,) = workload_points("w", wc)
    assert p.goodput == {"ttft_ms": 100, "itl_ms": 5}
    (q,) = workload_points("w", {**BASE, "concurrency": [1]})
    assert q.goodput == {}


def test_points_of_an_endpoint_send_no_request_extensions():
    assert all(
        p.request_extensions for p in plan_points({"w": {**BASE, "concurrency": [1]}}).points
    )
    plan = plan_points(
        {"w": {**BASE, "concurrency": [1], "request_rate": [1]}}, request_extensions=False
    )
    assert [p.request_extensions for p in plan.points] == [False, False]


def test_the_slo_of_a_point_is_slo_with_its_slo_by_load_merged_over_it():
    wc = {
        **BASE,
        "concurrency": [1, 64],
        "request_rate": [0.5],
        "slo": {"max_error_rate": 0, "ttft_ms": {"p50": 100}},
        "slo_by_load": {
            "c64": {"ttft_ms": {"p50": 150}, "min_output_tps": 20000},
            "r0p5": {"max_error_rate": 0.1},
        },
    }
    slos = plan_points({"w": wc}).slos
    assert slos["w_c1"] == {"max_error_rate": 0, "ttft_ms": {"p50": 100}}
    assert slos["w_c64"] == {"max_error_rate": 0, "ttft_ms": {"p50": 150}, "min_output_tps": 20000}
    assert slos["w_r0p5"] == {"max_error_rate": 0.1, "ttft_ms": {"p50": 100}}
    assert point_slo({**BASE}, "c1") == {}
    assert wc["slo"] == {"max_error_rate": 0, "ttft_ms": {"p50": 100}}  # the config is not changed


def test_a_workload_lists_at_least_one_load():
    for wc in ({**BASE}, {**BASE, "concurrency": [], "request_rate": []}):
        with pytest.raises(
            ValueError, match="workloads.w: concurrency or request_rate must list at least one load"
        ):
            check_workload("w", wc)
        with pytest.raises(ValueError, match="at least one load"):
            plan_points({"w": wc})


def test_slo_by_load_names_a_load_of_the_workload():
    wc = {
        **BASE,
        "concurrency": [1],
        "request_rate": [0.5],
        "slo_by_load": {"c2": {"max_error_rate": 0}},
    }
    with pytest.raises(
        ValueError,
        match=r"workloads.w.slo_by_load.c2 names no load of the workload "
        r"\(loads: \['c1', 'r0p5'\]\)",
    ):
        plan_points({"w": wc})
    check_workload("w", {**wc, "slo_by_load": {"r0p5": {"max_error_rate": 0}}})


def test_request_count_by_load_sets_the_count_of_its_loads_only():
    wc = {**BASE, "concurrency": [1, 64], "request_rate": [0.5]}
    wc["request_count_by_load"] = {"c64": 256, "r0p5": 7}
    points = {p.point_id: p for p in plan_points({"w": wc}).points}
    assert points["w_c1"].request_count == BASE["request_count"]
    assert points["w_c64"].request_count == 256 and points["w_r0p5"].request_count == 7
    assert points["w_c64"].entries() == 256 + points["w_c64"].warmup_request_count
    with pytest.raises(ValueError, match=r"workloads.w.request_count_by_load.c8 names no load"):
        plan_points({"w": {**wc, "request_count_by_load": {"c8": 4}}})


def test_a_session_runs_the_same_points_from_what_shapes_its_requests():
    wc = {
        **BASE,
        "concurrency": [1, 2],
        "request_rate": [4],
        "sampling": {"temperature": 0.7},
        "slo": {"ttft_ms": {"p50": 9}, "goodput": {"min_fraction": 0.5, "ttft_ms": 30}},
        "slo_by_load": {"c2": {"max_error_rate": 0}},
    }
    req = request_settings(wc)
    assert plan_points({"w": req}).points == plan_points({"w": wc}).points
    assert "slo_by_load" not in req and req["slo"] == {"goodput": {"ttft_ms": 30}}
    # an SLO (or the goodput fraction) changes the join's plan only; a goodput bound is an AIPerf
    # flag
    looser = {
        **wc,
        "slo": {"ttft_ms": {"p50": 99}, "goodput": {"min_fraction": 0.9, "ttft_ms": 30}},
        "slo_by_load": {},
    }
    assert (
        request_settings(looser) == req
        and plan_points({"w": looser}).slos != plan_points({"w": wc}).slos
    )
    assert request_settings({**wc, "slo": {"goodput": {"min_fraction": 0.5, "ttft_ms": 31}}}) != req
    assert request_settings({**BASE, "concurrency": [1], "slo": {"max_error_rate": 0}}) == {
        **BASE,
        "concurrency": [1],
    }


def test_the_embedded_default_expands_to_its_points():
    """The points of config/config.yaml (schema defaults filled in), as the session receives
    them."""
    from snakemake.utils import validate

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    validate(config, schema=str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
    plan = plan_points(
        {w: config["workloads"][w] for w in config["models"]["embedded"]["workloads"]}
    )
    assert [p.point_id for p in plan.points] == [
        "tiny_c2",
        "tiny_r2",
        "chat_c2",
        "chat-reasoning_c2",
        "chat-tools_c2",
        "chat-tools-required_c2",
        "chat-multiturn_c2",
        "chat-multiturn-chained_c2",
        "agent-replay_c2",
        "shared-prefix_c2",
    ]
    assert plan.points[1] == AiperfPoint(
        point_id="tiny_r2",
        workload="tiny",
        concurrency=None,
        request_rate=2,
        arrival_pattern="poisson",
        isl=32,
        osl=16,
        request_count=16,
        warmup_request_count=4,
        seed=42,
        goodput={"ttft_ms": 10000},
    )
    assert plan.points[2] == AiperfPoint(
        point_id="chat_c2",
        workload="chat",
        concurrency=2,
        isl=None,
        input_file="workloads/prompts/chat-v1.jsonl",
        osl=16,
        request_count=16,
        warmup_request_count=2,
        seed=42,
        sampling={"temperature": 0.7, "top_p": 0.9},
    )
    assert plan.points[3] == replace(
        plan.points[2],
        point_id="chat-reasoning_c2",
        workload="chat-reasoning",
        reasoning={"effort": "medium"},
        osl=288,
        request_count=8,
        warmup_request_count=1,
        sampling={"temperature": 0.6, "top_p": 0.95},
    )
    assert plan.points[3].extra_inputs_payload()["reasoning"] == {"effort": "medium"}
    multiturn, chained = plan.points[6:8]
    assert multiturn.cache_off_rerun and not chained.cache_off_rerun
    assert chained == replace(
        multiturn,
        point_id="chat-multiturn-chained_c2",
        workload="chat-multiturn-chained",
        chaining="previous_response_id",
        cache_off_rerun=False,
    )
    assert plan.slos["tiny_r2"] == config["workloads"]["tiny"]["slo"]
    assert (
        replace(plan.points[0], point_id="tiny_r2", concurrency=None, request_rate=2)
        == plan.points[1]
    )


def test_qualflow_points_writes_the_plan(tmp_path, capsys):
    wl = {"w": {**BASE, "concurrency": [1], "request_rate": [0.5], "slo": {"max_error_rate": 0}}}
    out = tmp_path / "plan.json"
    assert main(["points", "--workloads", json.dumps(wl), "--out", str(out)]) == 0
    plan = PointPlan.read(out)
    assert plan == plan_points(wl) and plan.slos == {
        "w_c1": {"max_error_rate": 0},
        "w_r0p5": {"max_error_rate": 0},
    }
    assert "points: 2 (w_c1, w_r0p5)" in capsys.readouterr().out
    src = tmp_path / "workloads.json"
    src.write_text(json.dumps(wl))
    assert (
        main(
            [
                "points",
                "--workloads",
                str(src),
                "--no-slos",
                "--no-request-extensions",
                "--out",
                str(tmp_path / "points.json"),
            ]
        )
        == 0
    )
    bare = PointPlan.read(tmp_path / "points.json")
    assert bare.slos == {} and bare.points == plan_points(wl, request_extensions=False).points


def test_qualflow_points_names_a_bad_workload(tmp_path, capsys):
    wl = {"w": {**BASE, "concurrency": [1], "slo_by_load": {"c9": {}}}}
    assert main(["points", "--workloads", json.dumps(wl), "--out", str(tmp_path / "p.json")]) == 2
    assert (
        "qualflow points: error: workloads.w.slo_by_load.c9 names no load"
        in capsys.readouterr().err
    )
    assert main(["points", "--workloads", "{nope", "--out", str(tmp_path / "p.json")]) == 2
    assert "--workloads: not JSON" in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()


def test_a_tools_workload_sends_its_tools_with_every_request():
    """config/config.yaml's tool points: the tools, tool_choice (auto; required) in AIPerf's
    --extra-inputs beside the other extra inputs; a `tools` without functions is refused."""
    from snakemake.utils import validate

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    validate(config, schema=str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
    auto, required = (
        plan_points({w: config["workloads"][w]}).points[0]
        for w in ("chat-tools", "chat-tools-required")
    )
    extra = auto.extra_inputs_payload()
    assert extra["tool_choice"] == "auto" and extra["store"] is False
    assert [t["name"] for t in extra["tools"]] == ["get_weather", "get_time"]
    assert required.extra_inputs_payload()["tool_choice"] == "required"
    assert extra["tools"] == required.extra_inputs_payload()["tools"]
    assert (
        "tools"
        not in plan_points({"chat": config["workloads"]["chat"]}).points[0].extra_inputs_payload()
    )
    from qualflow.aiperf.command import ClientOptions, build_command

    client = ClientOptions(url="http://127.0.0.1:9", model_name="m", tokenizer="/t")
    argv = build_command(auto, client, artifact_dir="/a")
    assert json.loads(argv[argv.index("--extra-inputs") + 1]) == extra
    with pytest.raises(ValueError, match="tools needs its functions"):
        build_command(replace(auto, tools={"tool_choice": "auto"}), client, artifact_dir="/a")
