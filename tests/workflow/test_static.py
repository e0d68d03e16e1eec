"""Fast checks of the Snakemake workflow: lint (only the documented conda/container lint remains),
dry runs of both configs, config validation naming the bad key, and the rule set of DESIGN.md."""
from __future__ import annotations

import re

import pytest

from fixtures.snakemake import smk


def test_lint_only_conda_lints(wf):
    r = smk(wf, "--lint", "--config", "software_key=lint")
    text = r.stdout + r.stderr
    items = re.findall(r"^\s+\* (.+?):?$", text, re.M)
    assert items, text[-2000:]
    # One venv for every rule, no --sdm: software versions are rule params instead (README).
    assert all(i.startswith("Specify a conda environment or container") for i in items), items


@pytest.mark.parametrize("configfile", [None, "config/qwen3-0.6b-fp16.yaml"])
def test_dry_run_has_every_stage(configfile, wf):
    args = ["-n", "-p", "qualify", "--config", "software_key=dry"]
    if configfile:
        args += ["--configfile", configfile]
    r = smk(wf, *args)
    assert r.returncode == 0, r.stderr[-3000:]
    for rule in ("pin_checkpoint", "build_bundle", "family_correctness", "aiperf_profile", "join_evidence",
                 "report", "qualify"):
        assert re.search(rf"^{rule}\s+1$", r.stdout + r.stderr, re.M), rule
    out = r.stdout + r.stderr
    if configfile:   # the pilot replaces (is not merged into) the embedded default
        assert "embedded_checkpoint" not in out and "Qwen/Qwen3-0.6B" in out
        assert "--device cuda" in out and "chat-1k-256_c64" in out
    else:
        assert re.search(r"^embedded_checkpoint\s+1$", out, re.M)


def test_bad_config_key_is_named(wf):
    r = smk(wf, "-n", "qualify", "--config", "software_key=x", "bogus_key=1")
    assert r.returncode != 0
    assert "bogus_key" in r.stdout + r.stderr


def test_unknown_workload_is_named(tmp_path, wf):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("models: {m: {checkpoint: embedded, profiles: [fp16], workloads: [nope]}}\n"
                   "workloads: {tiny: {concurrency: [1], isl: 8, osl: 8, request_count: 2}}\n")
    r = smk(wf, "-n", "qualify", "--configfile", str(cfg))
    assert r.returncode != 0 and "nope" in r.stdout + r.stderr


def test_hub_checkpoint_needs_revision(tmp_path, wf):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("models: {m: {checkpoint: Org/Model, profiles: [fp16], workloads: [tiny]}}\n"
                   "workloads: {tiny: {concurrency: [1], isl: 8, osl: 8, request_count: 2}}\n")
    r = smk(wf, "-n", "qualify", "--configfile", str(cfg))
    assert r.returncode != 0 and "revision must be a full commit sha" in r.stdout + r.stderr


def test_several_models_and_points_fan_out(tmp_path, wf):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("models:\n"
                   "  a: {checkpoint: embedded, profiles: [fp16, fp32], workloads: [w1, w2]}\n"
                   "  b: {checkpoint: embedded, profiles: [fp16], workloads: [w1]}\n"
                   "software_key: fan\n"
                   "workloads:\n"
                   "  w1: {concurrency: [1, 4], isl: 8, osl: 8, request_count: 2}\n"
                   "  w2: {concurrency: [2], isl: 8, osl: 8, request_count: 2}\n")
    r = smk(wf, "-n", "qualify", "--configfile", str(cfg), "-p")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert re.search(r"^aiperf_profile\s+3$", out, re.M) and re.search(r"^build_bundle\s+3$", out, re.M)
    assert "w1_c1" in out and "w1_c4" in out and "w2_c2" in out
