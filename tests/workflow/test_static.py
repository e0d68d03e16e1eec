"""Fast checks of the Snakemake workflow: lint (only the documented conda/container lint remains),
dry runs of both configs, config validation naming the bad key, the rule set, and the light points
rules (the only jobs these checks run)."""

from __future__ import annotations

import re

import pytest

from fixtures.snakemake import smk


def point_ids(wf, key, model, *args):
    """Runs the light points rules of one model (nothing else) and returns the ids of its points,
    after checking that the session's points are the plan's, without the SLOs."""
    d = f"results/points/{key}/{model}"
    r = smk(wf, f"{d}/plan.json", f"{d}/points.json", *args)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    from qualflow.workload import PointPlan

    plan, session = PointPlan.read(wf / d / "plan.json"), PointPlan.read(wf / d / "points.json")
    assert (
        session.points == plan.points
        and session.slos == {}
        and set(plan.slos) == {p.point_id for p in plan.points}
    )
    return [p.point_id for p in plan.points]


def test_lint_only_conda_lints(wf):
    r = smk(wf, "--lint", "--config", "software_key=lint")
    text = r.stdout + r.stderr
    items = re.findall(r"^\s+\* (.+?):?$", text, re.M)
    assert items, text[-2000:]
    # One venv for every rule, no --sdm: software versions are rule params instead (docs/dag.md).
    assert all(i.startswith("Specify a conda environment or container") for i in items), items


@pytest.mark.parametrize("configfile", [None, "config/qwen3-0.6b-fp16.yaml"])
def test_dry_run_has_every_stage(configfile, wf):
    args = ["-n", "-p", "qualify", "--config", "software_key=dry"]
    if configfile:
        args += ["--configfile", configfile]
    r = smk(wf, *args)
    assert r.returncode == 0, r.stderr[-3000:]
    for rule in (
        "pin_checkpoint",
        "build_bundle",
        "family_correctness",
        "aiperf_profile",
        "join_evidence",
        "report",
        "status",
        "qualify",
    ):
        assert re.search(rf"^{rule}\s+1$", r.stdout + r.stderr, re.M), rule
    out = r.stdout + r.stderr
    if configfile:  # the pilot replaces (is not merged into) the embedded default
        assert "embedded_checkpoint" not in out and "Qwen/Qwen3-0.6B" in out
        pilot = point_ids(wf, "dry", "qwen3-0.6b", *args[3:])
        assert (
            "--device cuda" in out and "chat-1k-256_c64" in pilot and "chat-reasoning_c8" in pilot
        )
    else:
        assert re.search(r"^embedded_checkpoint\s+1$", out, re.M)
        assert point_ids(wf, "dry", "embedded", *args[3:]) == [
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
    # the session's command names its points file: no inline JSON in its log
    (session,) = re.findall(r"^.*exec qualflow session .*$", out, re.M)
    assert "--points results/points/dry/" in session and "{" not in session and len(session) < 1000
    (join,) = re.findall(r"^.*qualflow join .*$", out, re.M)
    assert (
        "--points results/points/dry/" in join and "--slo" not in join and "--commands" not in join
    )


def test_bad_config_key_is_named(wf):
    r = smk(wf, "-n", "qualify", "--config", "software_key=x", "bogus_key=1")
    assert r.returncode != 0
    assert "bogus_key" in r.stdout + r.stderr
    # only the error that matters, not the schema it was checked against
    out = r.stdout + r.stderr
    assert (
        "config: (top level): Additional properties are not allowed ('bogus_key' was unexpected)"
        in out
    ), out
    assert "Failed validating" not in out and len(out.splitlines()) < 30, out


def test_unknown_workload_is_named(tmp_path, wf):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "models: {m: {checkpoint: embedded, profiles: [fp16], workloads: [nope]}}\n"
        "workloads: {tiny: {concurrency: [1], isl: 8, osl: 8, request_count: 2}}\n"
    )
    r = smk(wf, "-n", "qualify", "--configfile", str(cfg))
    assert r.returncode != 0 and "nope" in r.stdout + r.stderr


def test_hub_checkpoint_needs_revision(tmp_path, wf):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "models: {m: {checkpoint: Org/Model, profiles: [fp16], workloads: [tiny]}}\n"
        "workloads: {tiny: {concurrency: [1], isl: 8, osl: 8, request_count: 2}}\n"
    )
    r = smk(wf, "-n", "qualify", "--configfile", str(cfg))
    assert r.returncode != 0 and "revision must be a full commit sha" in r.stdout + r.stderr


def test_a_missing_local_checkpoint_is_named_as_such(tmp_path, wf):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "models: {m: {checkpoint: /nonexistent/ckpt-dir, profiles: [fp16], workloads: [tiny]}}\n"
        "workloads: {tiny: {concurrency: [1], isl: 8, osl: 8, request_count: 2}}\n"
    )
    r = smk(wf, "-n", "qualify", "--configfile", str(cfg))
    out = r.stdout + r.stderr
    assert (
        r.returncode != 0
        and "models.m.checkpoint: no such directory '/nonexistent/ckpt-dir'" in out
    ), out[-2000:]
    assert "commit sha" not in out


def test_several_models_and_points_fan_out(tmp_path, wf):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "models:\n"
        "  a: {checkpoint: embedded, profiles: [fp16, fp32], workloads: [w1, w2]}\n"
        "  b: {checkpoint: embedded, profiles: [fp16], workloads: [w1]}\n"
        "software_key: fan\n"
        "workloads:\n"
        "  w1: {concurrency: [1, 4], isl: 8, osl: 8, request_count: 2}\n"
        "  w2: {concurrency: [2], isl: 8, osl: 8, request_count: 2}\n"
    )
    r = smk(wf, "-n", "qualify", "--configfile", str(cfg), "-p")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert re.search(r"^aiperf_profile\s+3$", out, re.M) and re.search(
        r"^build_bundle\s+3$", out, re.M
    )
    # one plan per model, shared by its profiles' sessions
    assert re.search(r"^workload_points\s+2$", out, re.M) and re.search(
        r"^session_points\s+2$", out, re.M
    )
    assert point_ids(wf, "fan", "a", "--configfile", str(cfg)) == ["w1_c1", "w1_c4", "w2_c2"]
    assert point_ids(wf, "fan", "b", "--configfile", str(cfg)) == ["w1_c1", "w1_c4"]


def test_an_slo_change_reruns_the_join_not_the_session(tmp_path, wf):
    """The session's points are built from what shapes the requests: a changed SLO (or goodput
    fraction) reruns the plan, so the join; a changed request setting or goodput bound reruns
    both."""

    def cfg(name, slo, osl=8):
        f = tmp_path / f"{name}.yaml"
        f.write_text(
            "models: {m: {checkpoint: embedded, profiles: [fp16], workloads: [w]}}\n"
            "software_key: slo\n"
            f"workloads: {{w: {{concurrency: [1], isl: 8, osl: {osl}, request_count: 2, "
            f"slo: {slo}}}}}\n"
        )
        return str(f)

    def rerun(configfile):
        d = "results/points/slo/m"
        r = smk(wf, "-n", f"{d}/plan.json", f"{d}/points.json", "--configfile", configfile)
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
        return {
            rule
            for rule in ("workload_points", "session_points")
            if re.search(rf"^{rule}\s+1$", r.stdout + r.stderr, re.M)
        }

    base = cfg("base", "{max_error_rate: 0, goodput: {min_fraction: 0.5, ttft_ms: 100}}")
    point_ids(wf, "slo", "m", "--configfile", base)
    assert rerun(base) == set()
    assert rerun(
        cfg("slo", "{max_error_rate: 0.5, goodput: {min_fraction: 0.9, ttft_ms: 100}}")
    ) == {"workload_points"}
    assert rerun(
        cfg("bound", "{max_error_rate: 0, goodput: {min_fraction: 0.5, ttft_ms: 200}}")
    ) == {"workload_points", "session_points"}
    assert rerun(
        cfg("osl", "{max_error_rate: 0, goodput: {min_fraction: 0.5, ttft_ms: 100}}", osl=9)
    ) == {"workload_points", "session_points"}
