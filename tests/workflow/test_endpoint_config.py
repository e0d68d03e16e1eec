"""Endpoint models in the config: the DAG of an endpoint model skips build and the native Task (and
pins the checkpoint it names), and config errors are schema errors naming the key."""

from __future__ import annotations

import re

from fixtures.snakemake import smk

WORKLOADS = (
    "workloads: {tiny: {concurrency: [1], isl: 8, osl: 8, request_count: 2}}\nsoftware_key: ep\n"
)


def test_endpoint_model_skips_build_and_pins_its_checkpoint(tmp_path, wf):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "models:\n"
        "  ours: {checkpoint: embedded, profiles: [fp16], workloads: [tiny]}\n"
        "  theirs: {checkpoint: embedded, workloads: [tiny],\n"
        "           endpoint: {url: 'http://127.0.0.1:8001', model: served-name}}\n"
        "  hosted: {workloads: [tiny], endpoint: {url: 'https://api.example.com', model: m,\n"
        "           api_key_env: EXAMPLE_KEY, tokenizer: Qwen/Qwen3-0.6B}}\n" + WORKLOADS
    )
    r = smk(wf, "-n", "-p", "qualify", "--configfile", str(cfg))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert re.search(r"^build_bundle\s+1$", out, re.M)  # ours only
    assert re.search(r"^pin_checkpoint\s+2$", out, re.M)  # ours and theirs; hosted names none
    assert re.search(r"^family_correctness\s+3$", out, re.M) and re.search(
        r"^aiperf_profile\s+3$", out, re.M
    )
    # the stages decide endpoint vs bundle from the model's serving settings
    # (tests/test_workflow_config.py)
    assert (
        "qualflow correctness --model-settings results/points/ep/theirs/serving.json --pin "
        "results/pin/theirs.json" in out
    )
    assert '"endpoint": {"model": "served-name", "url": "http://127.0.0.1:8001"}' in out
    assert "results/session/ep/theirs/endpoint" in out and "--no-request-extensions" in out
    assert '"request_extensions": false' in out
    assert (
        "qualflow session --model-settings results/points/ep/ours/serving.json"
        " --bundle results/bundle/ep/ours/fp16 --out" in out
    )


def _bad(tmp_path, wf, model_yaml):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("models:\n  m: " + model_yaml + "\n" + WORKLOADS)
    r = smk(wf, "-n", "qualify", "--configfile", str(cfg))
    assert r.returncode != 0
    return r.stdout + r.stderr


def test_a_model_names_a_checkpoint_or_an_endpoint(tmp_path, wf):
    out = _bad(tmp_path, wf, "{workloads: [tiny]}")
    assert "config: models.m names neither 'checkpoint'" in out and "nor 'endpoint'" in out


def test_endpoint_keys_are_checked(tmp_path, wf):
    out = _bad(
        tmp_path, wf, "{workloads: [tiny], endpoint: {url: 'http://x:1', model: a, frobnicate: 1}}"
    )
    assert "frobnicate" in out
    out = _bad(tmp_path, wf, "{workloads: [tiny], endpoint: {url: 'x:1', model: a}}")
    assert "url" in out and "does not match" in out
    out = _bad(tmp_path, wf, "{workloads: [tiny], endpoint: {model: a}}")
    assert "'url' is a required property" in out
    out = _bad(
        tmp_path,
        wf,
        "{workloads: [tiny], profiles: [fp16], endpoint: {url: 'http://x:1', model: a}}",
    )
    assert "models.m.profiles: an endpoint has no build profile" in out
