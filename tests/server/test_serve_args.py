"""`qualflow serve`'s flags are generated from ServerConfig and EngineConfig: each field is one
flag, with the field's help, and the flags the workflow, benchmarks and users spell keep working."""

from __future__ import annotations

import argparse
import dataclasses

from qualflow.configs import flag_of, from_args, to_argv
from qualflow.server import add_serve_args
from qualflow.server.config import EngineConfig, ServerConfig, StoreConfig

SPELLED = (
    "--bundle",
    "--host",
    "--port",
    "--model-name",
    "--timing-log",
    "--max-queue",
    "--max-body-bytes",
    "--log-level",
    "--device",
    "--max-batch",
    "--max-context",
    "--cpu-threads",
    "--gil-switch-ms",
    "--engine-process",
    "--step-delay-s",
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="qualflow serve")
    add_serve_args(p)
    return p


def test_every_config_field_is_a_flag_with_the_fields_help():
    actions = {a.option_strings[0]: a for a in _parser()._actions if a.option_strings}
    for cls in (ServerConfig, StoreConfig, EngineConfig):
        for f in dataclasses.fields(cls):
            if dataclasses.is_dataclass(f.type) or f.type == "StoreConfig":
                continue  # a nested config: its own fields are its flags
            a = actions[flag_of(f)]
            if f.metadata.get("qualflow_suppress") or f.metadata.get(
                "qualflow_settled"
            ):  # test-only, settled A/B
                assert a.help == argparse.SUPPRESS, f.name
            else:
                assert a.help and a.help == f.metadata["help"], f.name
    helped = {
        a.option_strings[0] for a in actions.values() if a.help and a.help != argparse.SUPPRESS
    }
    assert set(SPELLED) - {"--step-delay-s"} <= helped
    assert "max_batch x max_context" not in actions["--max-context"].help


def test_the_existing_spellings_parse_to_the_configs():
    ns = _parser().parse_args(
        [
            "--bundle",
            "B",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--model-name",
            "m",
            "--timing-log",
            "t.jsonl",
            "--max-queue",
            "3",
            "--max-body-bytes",
            "100",
            "--log-level",
            "warning",
            "--device",
            "cuda",
            "--max-batch",
            "64",
            "--max-context",
            "512",
            "--cpu-threads",
            "1",
            "--gil-switch-ms",
            "0",
            "--engine-process",
            "--step-delay-s",
            "0.01",
        ]
    )
    assert from_args(ServerConfig, ns) == ServerConfig(
        bundle="B",
        host="0.0.0.0",
        port=0,
        model_name="m",
        timing_log="t.jsonl",
        max_queue=3,
        max_body_bytes=100,
        log_level="warning",
    )
    assert from_args(EngineConfig, ns) == EngineConfig(
        device="cuda",
        max_batch=64,
        max_context=512,
        cpu_threads=1,
        gil_switch_ms=0.0,
        engine_process="on",
        step_delay_s=0.01,
    )


def test_defaults_are_the_fields_defaults():
    ns = _parser().parse_args(["--bundle", "B"])
    assert from_args(ServerConfig, ns) == ServerConfig(bundle="B")
    assert from_args(EngineConfig, ns) == EngineConfig()


def test_engine_process_is_auto_on_off_and_keeps_the_switch_spellings():
    p = _parser()
    assert from_args(EngineConfig, p.parse_args(["--bundle", "B"])).engine_process == "auto"
    for argv, mode in (
        (["--engine-process"], "on"),
        (["--no-engine-process"], "off"),
        (["--engine-process", "on"], "on"),
        (["--engine-process", "off"], "off"),
        (["--engine-process", "auto"], "auto"),
    ):
        assert (
            from_args(EngineConfig, p.parse_args(["--bundle", "B", *argv])).engine_process == mode
        ), argv
    # auto resolves per device type: the engine process on cuda, the engine thread on cpu
    assert EngineConfig(device="cuda").in_own_process("cuda") and not EngineConfig().in_own_process(
        "cpu"
    )
    assert EngineConfig(engine_process="on").in_own_process("cpu")
    assert not EngineConfig(engine_process="off").in_own_process("cuda")
    # a session starts the server with exactly its mode
    cfg = EngineConfig(engine_process="off", max_batch=2)
    assert from_args(EngineConfig, p.parse_args(["--bundle", "B", *to_argv(cfg)])) == cfg
