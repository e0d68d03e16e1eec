"""`qualflow session`'s flags are generated from SessionConfig (and the engine's EngineConfig) with
the spellings the workflow and users type; one default per field; --points takes a points.json or a
bare list of points; the settings a session records."""

from __future__ import annotations

import dataclasses
import json

import pytest

from qualflow.cli import build_parser
from qualflow.configs import defaults, from_args, to_argv
from qualflow.runtime.config import EngineConfig
from qualflow.session.config import SessionConfig
from qualflow.session.points import read_points
from qualflow.session.settings import engine_settings, session_settings
from qualflow.workload import PointPlan

POINT = {"point_id": "tiny_c1", "concurrency": 1, "isl": 8, "osl": 4, "request_count": 2}


def _parse(*argv: str) -> SessionConfig:
    a = build_parser().parse_args(["session", "--out", "s", "--points", "p.json", *argv])
    return from_args(SessionConfig, a)


def test_flags_keep_their_spellings():
    cfg = _parse(
        "--bundle",
        "b",
        "--no-protocol",
        "--no-request-extensions",
        "--record-failures",
        "--allow-unpinned-client",
        "--run-name",
        "embedded",
        "fp16",
        "--archive-dir",
        "h",
        "--startup-timeout",
        "5",
        "--warmup-requests",
        "1",
        "--warmup-max-tokens",
        "2",
        "--aiperf-workers",
        "3",
        "--aiperf-record-processors",
        "2",
        "--aiperf-timeout",
        "9",
        "--host",
        "0.0.0.0",
        "--port",
        "8123",
        "--model-name",
        "m",
        "--device",
        "cuda:1",
        "--max-batch",
        "4",
        "--max-context",
        "512",
        "--cpu-threads",
        "1",
    )
    assert cfg == SessionConfig(
        out="s",
        points="p.json",
        bundle="b",
        protocol=False,
        request_extensions=False,
        record_failures=True,
        allow_unpinned_client=True,
        run_name=("embedded", "fp16"),
        archive_dir="h",
        startup_timeout=5.0,
        warmup_requests=1,
        warmup_max_tokens=2,
        aiperf_workers=3,
        aiperf_record_processors=2,
        aiperf_timeout=9.0,
        host="0.0.0.0",
        port=8123,
        model_name="m",
        engine=EngineConfig(device="cuda:1", max_batch=4, max_context=512, cpu_threads=1),
    )
    assert _parse(*to_argv(cfg)) == cfg  # the flags that rebuild a config


def test_defaults_are_the_fields_defaults():
    cfg = _parse()
    assert cfg == SessionConfig(out="s", points="p.json")
    d = defaults(SessionConfig)
    assert (
        d["port"],
        d["model_name"],
        d["startup_timeout"],
        d["warmup_requests"],
        d["warmup_max_tokens"],
    ) == (0, "qualflow", 600.0, 4, 16)
    assert (
        d["protocol"]
        and d["request_extensions"]
        and not d["record_failures"]
        and d["run_name"] is None
    )
    assert d["max_batch"] == EngineConfig().max_batch  # the engine's, flattened
    with pytest.raises(SystemExit):
        build_parser().parse_args(["session", "--out", "s"])  # --points is required


def test_points_from_a_points_json_or_a_bare_list(tmp_path):
    plan = PointPlan.from_json({"points": [POINT], "slos": {"tiny_c1": {"ttft_ms": {"p50": 10}}}})
    plan.write(tmp_path / "points.json")
    assert read_points(str(tmp_path / "points.json")) == plan
    (tmp_path / "list.json").write_text(json.dumps([POINT]))
    assert read_points(str(tmp_path / "list.json")).points == plan.points
    assert read_points(json.dumps([POINT])).points == plan.points  # inline, for hand use
    assert SessionConfig(out="s", points=str(tmp_path / "points.json")).plan().slos == plan.slos
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_points(str(tmp_path / "absent.json"))


def test_recorded_settings_keep_their_keys(tmp_path):
    cfg = SessionConfig(
        out="s",
        points="p",
        warmup_requests=2,
        warmup_max_tokens=4,
        engine=EngineConfig(cpu_threads=1),
    )
    assert session_settings(cfg, None) == {
        "device": "cpu",
        "engine_process": "off",
        "max_batch": None,
        "max_context": None,
        "cpu_threads": 1,
        "aiperf_workers": 1,
        "aiperf_record_processors": 1,
        "warmup_requests": 2,
        "warmup_max_tokens": 4,
        "protocol_checks": True,
    }
    off = dataclasses.replace(cfg, request_extensions=False, protocol=False)
    assert session_settings(off, True) == {
        "stack": "endpoint",
        "endpoint_launched": True,
        "aiperf_workers": 1,
        "aiperf_record_processors": 1,
        "warmup_requests": 2,
        "warmup_max_tokens": 4,
        "protocol_checks": False,
        "request_extensions": False,
    }
    # thinking budgets changed from the family's reach our server and are recorded
    budgets = dataclasses.replace(cfg, reasoning_budgets=(8, 8, 16, 0), bundle="b")
    assert session_settings(budgets, None)["reasoning_budgets"] == [8, 8, 16, 0]
    from types import SimpleNamespace

    from qualflow.session.run import _our_server

    srv, _ = _our_server(
        budgets, tmp_path, lambda server, engine, log_path: SimpleNamespace(url="u", server=server)
    )
    assert srv.server.reasoning_budgets == (8, 8, 16, 0)
    # an engine setting away from its default is recorded, so runs that differ in it are not
    # comparable
    assert engine_settings(EngineConfig(engine_process="on", max_batch=2))["engine_process"] == "on"
    assert engine_settings(EngineConfig(engine_process="on", max_batch=2))["max_batch"] == 2
    # the engine's mode is recorded resolved, also at the default "auto": on for cuda, off for cpu
    assert engine_settings(EngineConfig(device="cuda:0"))["engine_process"] == "on"
    assert engine_settings(EngineConfig(device="cpu"))["engine_process"] == "off"
    assert (
        engine_settings(EngineConfig(device="cuda", engine_process="off"))["engine_process"]
        == "off"
    )
    assert "step_delay_s" not in engine_settings(EngineConfig(step_delay_s=0.2))  # a test-only knob


def test_api_server_counts_reach_both_servers_and_the_settings(tmp_path):
    from types import SimpleNamespace

    from qualflow.session.ceiling import _server
    from qualflow.session.run import _our_server

    cfg = _parse("--bundle", "b", "--api-server-count", "2", "--ceiling-api-server-count", "4")
    assert (cfg.api_server_count, cfg.ceiling_api_server_count) == (2, 4)
    factory = lambda server, engine, log_path: SimpleNamespace(url="u", server=server, env={})  # noqa: E731
    assert _our_server(cfg, tmp_path, factory)[0].server.api_server_count == 2
    session = SimpleNamespace(
        cfg=cfg, points=[], server_factory=factory, srv=SimpleNamespace(env={})
    )
    assert _server(session, tmp_path).server.api_server_count == 4
    # recorded above 1 only (a run of one API process keeps the settings it always had), the engine
    # in its own process then
    assert (
        session_settings(cfg, None)["api_server_count"] == 2
        and session_settings(cfg, None)["engine_process"] == "on"
    )
    assert "api_server_count" not in session_settings(_parse("--bundle", "b"), None)
    with pytest.raises(ValueError, match="api_server_count"):
        _parse("--api-server-count", "0")
