"""Session points: AIPerf's session flags, the inputs_json replay and its per-run rendering."""

import json

import pytest

from qualflow.aiperf.command import AiperfPoint, build_command
from qualflow.aiperf.options import ClientOptions
from qualflow.aiperf.sessions import render_inputs_json
from qualflow.workload import workload_points

CLIENT = ClientOptions(model_name="m", tokenizer="/tok", url="http://127.0.0.1:1")


def _argv(**kw):
    p = AiperfPoint(point_id="p", concurrency=2, osl=8, **{"isl": 16, **kw})
    return build_command(p, CLIENT, artifact_dir="/a")


def _after(argv, flag):
    return argv[argv.index(flag) + 1]


def test_multiturn_sessions_pass_conversation_flags():
    argv = _argv(conversation_num=4, conversation_turn_mean=3, conversation_turn_stddev=1)
    assert _after(argv, "--conversation-num") == "4"
    assert _after(argv, "--conversation-turn-mean") == "3"
    assert _after(argv, "--conversation-turn-stddev") == "1"
    assert "--use-server-token-count" not in argv
    assert json.loads(_after(argv, "--extra-inputs"))["store"] is False


def test_chaining_turns_the_store_on_with_server_token_counts():
    argv = _argv(conversation_num=2, conversation_turn_mean=3, chaining="previous_response_id")
    assert json.loads(_after(argv, "--extra-inputs"))["store"] is True
    assert "--use-server-token-count" in argv
    with pytest.raises(ValueError, match="chaining needs sessions"):
        _argv(chaining="previous_response_id")


def test_shared_prefix_passes_the_system_prompt_length():
    assert _after(_argv(shared_system_prompt_length=64), "--shared-system-prompt-length") == "64"


def test_inputs_json_replays_the_file_and_excludes_other_prompts():
    argv = _argv(isl=None, inputs_json="/f.json")
    assert _after(argv, "--input-file") == "/f.json"
    assert _after(argv, "--custom-dataset-type") == "inputs_json"
    with pytest.raises(ValueError, match="exactly one of isl"):
        _argv(inputs_json="/f.json")
    with pytest.raises(ValueError, match="sessions come from the file"):
        _argv(isl=None, inputs_json="/f.json", conversation_num=2)


def test_render_sets_model_stream_and_limits_on_every_payload(tmp_path):
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"data": [{"session_id": "s", "payloads": [{"input": "a"}] * 2}]}))
    p = AiperfPoint(point_id="p", concurrency=1, isl=None, osl=8, inputs_json=str(src))
    out = json.loads(render_inputs_json(p, "served", tmp_path / "out.json").read_text())
    for payload in out["data"][0]["payloads"]:
        assert payload["model"] == "served" and payload["stream"] is True
        assert payload["max_output_tokens"] == 8 and payload["input"] == "a"
        assert payload["store"] is False and payload["ignore_eos"] is True


def test_chaining_with_a_harness_ceiling_is_refused_naming_the_key():
    """The ceiling's server has no response store; chaining and the cache-off rerun are
    otherwise points like any other."""
    wl = {"concurrency": [1], "isl": 8, "osl": 8, "conversation_num": 2}
    chained = {**wl, "chaining": "previous_response_id"}
    with pytest.raises(ValueError, match=r"workloads\.w\.harness_ceiling: .*no response store"):
        workload_points("w", {**chained, "harness_ceiling": True})
    (p,) = workload_points("w", {**chained, "cache_off_rerun": True})
    assert p.chaining == "previous_response_id" and p.cache_off_rerun
    assert workload_points("w", {**wl, "harness_ceiling": True})[0].harness_ceiling


def test_a_chained_point_sends_the_session_api_key():
    p = AiperfPoint(
        point_id="p",
        concurrency=2,
        isl=16,
        osl=8,
        conversation_num=2,
        conversation_turn_mean=3,
        chaining="previous_response_id",
    )
    client = ClientOptions(model_name="m", tokenizer="/tok", url="http://h:1", api_key="qf-k")
    argv = build_command(p, client, artifact_dir="/a")
    assert _after(argv, "--api-key") == "qf-k" and "--use-server-token-count" in argv
    assert json.loads(_after(argv, "--extra-inputs"))["store"] is True


def test_the_committed_agent_file_holds_tool_sessions():
    from pathlib import Path

    data = json.loads(
        (Path(__file__).parents[2] / "workloads" / "agent" / "agent-v1.json").read_text()
    )["data"]
    assert len(data) == 20
    for s in data:
        last = s["payloads"][-1]
        assert last["tools"] and all(t["type"] == "function" for t in last["tools"])
        kinds = {i["type"] for i in last["input"]}
        assert {"message", "function_call", "function_call_output"} <= kinds
        assert "model" not in last
