"""The pinned AIPerf command and the judgement of its exports (hand-made fixture files following
AIPerf 0.13.0's export schema)."""

from __future__ import annotations

import json

import pytest

from fixtures.aiperf_exports import write_run
from qualflow.aiperf.command import AiperfPoint, build_command
from qualflow.aiperf.exports import judge_run, payload_text, read_inputs, read_outputs, read_records
from qualflow.aiperf.options import ClientOptions


def _point(**kw):
    base = dict(
        point_id="tiny_c2", concurrency=2, isl=32, osl=16, request_count=3, warmup_request_count=1
    )
    base.update(kw)
    return AiperfPoint(**base)


def _flag(cmd, name):
    return cmd[cmd.index(name) + 1]


def test_command_pins_every_workload_flag():
    cmd = build_command(
        _point(isl_stddev=2),
        ClientOptions(url="http://127.0.0.1:9", model_name="m", tokenizer="/b"),
        artifact_dir="/a",
        phase_header="aiperf:tiny_c2",
    )
    assert cmd[:2] == ["aiperf", "profile"]
    assert _flag(cmd, "--endpoint-type") == "responses" and "--streaming" in cmd
    assert _flag(cmd, "--synthetic-input-tokens-mean") == "32"
    assert _flag(cmd, "--synthetic-input-tokens-stddev") == "2"
    assert (
        _flag(cmd, "--output-tokens-mean") == "16" and _flag(cmd, "--output-tokens-stddev") == "0"
    )
    assert _flag(cmd, "--random-seed") == "42"
    assert _flag(cmd, "--request-count") == "3" and _flag(cmd, "--warmup-request-count") == "1"
    assert _flag(cmd, "--concurrency") == "2"
    assert _flag(cmd, "--num-dataset-entries") == "4"
    assert _flag(cmd, "--dataset-sampling-strategy") == "sequential"
    assert json.loads(_flag(cmd, "--extra-inputs")) == {
        "ignore_eos": True,
        "min_tokens": 16,
        "store": False,
    }
    assert _flag(cmd, "--tokenizer") == "/b" and _flag(cmd, "--artifact-dir") == "/a"
    assert _flag(cmd, "--header") == "X-Qualflow-Phase:aiperf:tiny_c2"
    for f in ("--no-server-metrics", "--no-gpu-telemetry"):
        assert f in cmd
    assert _flag(cmd, "--ui-type") == "none" and _flag(cmd, "--workers-max") == "1"
    assert _flag(cmd, "--export-level") == "records"


def test_command_non_streaming_and_min_tokens_override():
    cmd = build_command(
        _point(streaming=False, min_tokens=4, warmup_request_count=0),
        ClientOptions(url="u", model_name="m", tokenizer="t"),
        artifact_dir="a",
    )
    assert "--streaming" not in cmd and "--warmup-request-count" not in cmd
    assert json.loads(_flag(cmd, "--extra-inputs"))["min_tokens"] == 4


def test_point_rejects_unknown_keys_and_bad_values():
    with pytest.raises(ValueError, match="unknown workload point keys"):
        AiperfPoint.from_dict({"point_id": "x", "concurrency": 1, "isl": 1, "osl": 1, "bogus": 1})
    with pytest.raises(ValueError):
        build_command(
            _point(concurrency=0),
            ClientOptions(url="u", model_name="m", tokenizer="t"),
            artifact_dir="a",
        )


def test_read_records_flattens_metadata_and_metrics(tmp_path):
    d = write_run(tmp_path / "run", errors=1)
    rows = read_records(d)
    assert [r["benchmark_phase"] for r in rows] == ["warmup", "profiling", "profiling", "profiling"]
    ok = rows[-1]
    assert (
        ok["request_id"] == "p2"
        and ok["request_latency"] == 95.0
        and ok["time_to_first_token"] == 20.0
    )
    err = rows[1]
    assert err["client_error_code"] == 500 and err["request_latency"] is None
    assert rows[0]["profiling_index"] is None
    inputs = read_inputs(d)
    assert payload_text(inputs[("session_000001", 0)]) == "prompt 1"
    assert read_outputs(d)["p0"] == "hello"


def test_judge_success(tmp_path):
    v = judge_run(
        write_run(tmp_path / "ok"),
        expected_requests=3,
        expected_warmup=1,
        expected_seed=42,
        exit_code=0,
    )
    assert v.ok, v.reasons
    assert v.profiling_records == 3 and v.warmup_records == 1 and len(v.dataset_sha256) == 64


@pytest.mark.parametrize(
    "kw,expect",
    [
        (dict(errors=1), "requests failed"),  # AIPerf exits 0 here
        (dict(cancelled=True), "cancelled"),  # Ctrl-C: exit 0, was_cancelled
        (dict(ready=False), "no .aiperf_results_ready.json"),
        (dict(n_prof=2, request_count=2), "request_count 2.0 != expected 3"),
        (dict(seed=7), "random_seed 7 != expected 42"),
        (dict(n_warm=0), "0 warmup records"),
    ],
)
def test_judge_failures_despite_exit_code_zero(tmp_path, kw, expect):
    v = judge_run(
        write_run(tmp_path / "bad", **kw),
        expected_requests=3,
        expected_warmup=1,
        expected_seed=42,
        exit_code=0,
    )
    assert not v.ok
    assert any(expect in r for r in v.reasons), v.reasons


def test_judge_missing_exports(tmp_path):
    (tmp_path / "empty").mkdir()
    v = judge_run(tmp_path / "empty", expected_requests=3, exit_code=1)
    assert not v.ok and any("profile_export_aiperf.json" in r for r in v.reasons)


def test_osl_mismatch_is_a_warning_unless_asked(tmp_path):
    d = write_run(tmp_path / "osl")
    s = json.loads((d / "profile_export_aiperf.json").read_text())
    s["osl_mismatch_count"] = {"unit": "requests", "avg": 2.0}
    (d / "profile_export_aiperf.json").write_text(json.dumps(s))
    assert judge_run(d, expected_requests=3, expected_warmup=1).ok
    assert judge_run(d, expected_requests=3, expected_warmup=1).warnings
    assert not judge_run(d, expected_requests=3, expected_warmup=1, check_osl=True).ok


def test_a_truncated_last_line_is_left_out_and_said(tmp_path):
    d = write_run(tmp_path / "run", n_prof=3)
    text = (d / "profile_export.jsonl").read_text()
    (d / "profile_export.jsonl").write_text(text[: len(text) - 40])  # the writer stopped mid-line
    problems = []
    assert [r["request_id"] for r in read_records(d, problems)] == ["w0", "p0", "p1"]
    assert problems == ["profile_export.jsonl: the last line (4) is truncated and was left out"]
    v = judge_run(d, expected_requests=3, expected_warmup=1)
    assert not v.ok and "2 profiling records in profile_export.jsonl, expected 3" in v.reasons
    assert problems[0] in v.warnings


def test_a_bad_line_before_the_last_names_file_and_line(tmp_path):
    d = write_run(tmp_path / "run", n_prof=3)
    lines = (d / "profile_export.jsonl").read_text().splitlines()
    lines[1] = lines[1][:20]
    (d / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    v = judge_run(d, expected_requests=3, expected_warmup=1)
    assert not v.ok and any("profile_export.jsonl:2: not a JSON record" in r for r in v.reasons)


def test_stale_private_tmpdirs_are_removed(tmp_path):
    import os

    from qualflow.aiperf.runner import TMP_PREFIX, remove_stale_tmpdirs

    dead = tmp_path / f"{TMP_PREFIX}999999999-abc"  # a pid that cannot be alive
    mine = tmp_path / f"{TMP_PREFIX}{os.getpid()}-def"
    for d in (dead, mine):
        (d / "ipc").mkdir(parents=True)
    assert remove_stale_tmpdirs(str(tmp_path)) == [dead]
    assert not dead.exists() and mine.exists()


@pytest.mark.parametrize("length", [27, 31, 40])
def test_a_temp_base_too_long_for_aiperf_sockets_falls_back_to_tmp(monkeypatch, length):
    """AIPerf's ZMQ socket paths below the private dir must stay under 107 bytes: a TMPDIR of 31
    characters (a chaos cycle's) made `dataset_manager_proxy_frontend.ipc` 110 bytes long and
    AIPerf failed to start; such a base falls back to /tmp, a short one is kept."""
    import tempfile

    from qualflow.aiperf import runner

    base = "/tmp/" + "x" * (length - 5)
    monkeypatch.setattr(tempfile, "tempdir", base)
    assert runner._tmp_base() == "/tmp"
    tail = "/qf-aiperf-4194304-abcdefgh/tmpabcdefgh/aiperf/dataset_manager_proxy_frontend.ipc"
    assert len("/tmp" + tail) <= runner.SOCKET_PATH_MAX
    monkeypatch.setattr(tempfile, "tempdir", "/tmp/ci")
    assert runner._tmp_base() == "/tmp/ci"


def test_reasoning_reaches_the_payload_nested_as_aiperf_parses_extra_inputs():
    """`reasoning: {effort}` goes into --extra-inputs as one JSON object, which AIPerf 0.13.0 parses
    into top-level (key, value) pairs merged into every payload: `reasoning` arrives as a nested
    object, with or without our request extensions (it is a standard Responses field)."""
    from aiperf.config.loader.parsing import parse_str_or_dict_as_tuple_list

    client = ClientOptions(url="u", model_name="m", tokenizer="t")
    for extensions in (True, False):
        p = _point(
            input_file="prompts.jsonl",
            isl=None,
            reasoning={"effort": "medium"},
            sampling={"temperature": 0.6},
            request_extensions=extensions,
        )
        pairs = parse_str_or_dict_as_tuple_list(
            _flag(build_command(p, client, artifact_dir="a"), "--extra-inputs")
        )
        assert ("reasoning", {"effort": "medium"}) in pairs and ("temperature", 0.6) in pairs
        assert ("ignore_eos", True) in pairs if extensions else "ignore_eos" not in dict(pairs)
    assert "reasoning" not in json.loads(
        _flag(build_command(_point(), client, artifact_dir="a"), "--extra-inputs")
    )


def test_prompt_corpus_is_pinned_for_synthetic_prompts_only():
    client = ClientOptions(url="http://127.0.0.1:9", model_name="m", tokenizer="/b")
    assert "--prompt-corpus" not in build_command(
        _point(), client, artifact_dir="/a"
    )  # AIPerf's default
    assert (
        _flag(
            build_command(_point(prompt_corpus="random"), client, artifact_dir="/a"),
            "--prompt-corpus",
        )
        == "random"
    )
    for bad in (
        dict(prompt_corpus="lorem"),
        dict(prompt_corpus="random", input_file="p.jsonl", isl=None),
    ):
        with pytest.raises(ValueError, match="prompt_corpus is one of"):
            build_command(_point(**bad), client, artifact_dir="/a")
