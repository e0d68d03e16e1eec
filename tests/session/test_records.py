"""The session's records keep the files' keys: session.json, startup.json and run.json as the
session wrote them before the records were typed read back and write out unchanged (keys, their
order and values), a key the session never reached stays absent, and null stays null."""

from __future__ import annotations

import json

from qualflow.aiperf.command import AiperfPoint
from qualflow.session.records import (
    NOT_REACHED,
    PointRun,
    SessionRecord,
    StartupRecord,
    repeat_run_id,
    run_id_of,
)

STAGE = {"start_ns": 1796155670821711250, "end_ns": 1796155673944611751, "wall_s": 3.122900501}
SETTINGS = {
    "device": "cpu",
    "max_batch": None,
    "max_context": None,
    "cpu_threads": 1,
    "aiperf_workers": 1,
    "aiperf_record_processors": 1,
    "warmup_requests": 2,
    "warmup_max_tokens": 4,
    "protocol_checks": True,
}
# a successful session.json as written by the session before SessionRecord existed
SESSION_OK = {
    "bundle": "/b",
    "device": "cpu",
    "url": "http://127.0.0.1:34115",
    "model_name": "qualflow",
    "stack": "qualflow",
    "server_timing": "available",
    "server_command": ["python", "-m", "qualflow.cli", "serve", "--bundle", "/b"],
    "settings": SETTINGS,
    "stages": {
        "startup": STAGE,
        "warmup": STAGE,
        "protocol": STAGE,
        "aiperf:tiny_c2": STAGE,
        "shutdown": STAGE,
    },
    "points": {
        "tiny_c2": {
            "command": "aiperf profile --model qualflow",
            "exit_code": 0,
            "ok": True,
            "reasons": [],
        }
    },
    "error": None,
    "client_pin_reasons": [],
    "session_started_ns": 1796155670821508577,
    "run_id": "embedded.fp16.20261201T200750Z",
    "server_pid": 9614,
    "timing_records_missing": 0,
    "server_exit_code": -15,
    "session_ended_ns": 1796155699699705580,
}
# a session whose server never came up, on a leased GPU, whose archive failed
SESSION_FAILED = {
    "bundle": "/nope",
    "device": "cuda",
    "url": "http://127.0.0.1:49903",
    "model_name": "qualflow",
    "stack": "qualflow",
    "server_timing": "available",
    "server_command": ["python"],
    "settings": SETTINGS,
    "stages": {"gpu-lease": STAGE, "shutdown": STAGE},
    "points": {},
    "error": {
        "stage": "startup",
        "type": "ServerCrashed",
        "message": "server (pid 11699) exited with code 1",
    },
    "client_pin_reasons": [],
    "session_started_ns": 1796155736930377040,
    "run_id": None,
    "gpu": {"index": 1, "uuid": "GPU-bbb", "cores": [0]},
    "other_gpu_jobs": [{"job": "other session"}],
    "server_pid": 11699,
    "server_exit_code": 1,
    "session_ended_ns": 1796155742896042793,
    "cleanup_errors": ["archive: OSError: disk full"],
}
# an endpoint nobody launched: no pid and no server records, both null
SESSION_ENDPOINT = {
    **{
        k: v
        for k, v in SESSION_OK.items()
        if k not in ("server_pid", "timing_records_missing", "server_exit_code", "session_ended_ns")
    },
    "device": None,
    "stack": "endpoint",
    "server_timing": "unavailable",
    "server_command": ["<external endpoint>"],
    "settings": {
        "stack": "endpoint",
        "endpoint_launched": False,
        "protocol_checks": True,
        "request_extensions": False,
    },
    "server_pid": None,
    "timing_records_missing": None,
    "server_exit_code": None,
    "session_ended_ns": 5,
}
HEALTH = {"status": "ok", "load_s": 0.09, "startup_s": 2.87, "context_limit": 2048}
STARTUP = {
    "url": "http://127.0.0.1:34115",
    "pid": 9614,
    "spawn_ns": 1,
    "healthy_ns": 3122764728,
    "startup_s": 3.122764727,
    "load_s": 0.09,
    "server_startup_s": 2.87,
    "health": HEALTH,
}
STARTUP_WARM = {**STARTUP, "warmup_s": 0.21, "warmup_requests": 2}


def _same(d: dict, back: dict) -> None:
    assert json.dumps(back) == json.dumps(d)  # keys, their order and values


def test_session_json_round_trips_unchanged():
    for d in (SESSION_OK, SESSION_FAILED, SESSION_ENDPOINT):
        rec = SessionRecord.from_json(json.loads(json.dumps(d)))
        out = rec.to_json()
        assert out.pop("command") is None  # the one key the stage commands added
        _same(d, out)


def test_session_record_keys_not_reached_stay_absent(tmp_path):
    rec = SessionRecord.from_json(SESSION_OK)
    assert rec.gpu is NOT_REACHED and not rec.gpu and rec.cleanup_errors is NOT_REACHED
    assert "gpu" not in rec.to_json() and "cleanup_errors" not in rec.to_json()
    ep = SessionRecord.from_json(SESSION_ENDPOINT)
    assert ep.server_pid is None and ep.to_json()["server_pid"] is None and ep.endpoint
    fresh = SessionRecord(url="http://x", session_started_ns=1, command="qualflow session --out s")
    assert list(fresh.to_json())[-1] == "command" and "server_pid" not in fresh.to_json()
    fresh.write(tmp_path / "session.json")
    assert SessionRecord.read(tmp_path / "session.json").to_json() == fresh.to_json()


def test_session_record_reads_the_failure_and_the_protocol_switch():
    rec = SessionRecord.from_json(SESSION_FAILED)
    assert (
        rec.failure()
        == "session failed in startup: ServerCrashed: server (pid 11699) exited with code 1"
    )
    assert SessionRecord.from_json({"error": "boom"}).failure() == "session failed: boom"
    assert (
        rec.protocol_checks
        and not SessionRecord.from_json({"settings": {"protocol_checks": False}}).protocol_checks
    )
    assert rec.stages["gpu-lease"].wall_s == STAGE["wall_s"]
    empty = SessionRecord.from_json({})  # a session that wrote nothing: the join's defaults
    assert (empty.stack, empty.server_timing, empty.settings, empty.run_id) == (
        "qualflow",
        "available",
        {},
        None,
    )


def test_startup_json_round_trips_in_each_of_its_forms(tmp_path):
    never = {"healthy_ns": None, "error": "server never became healthy"}
    for d in (STARTUP, STARTUP_WARM, never):
        _same(d, StartupRecord.from_json(json.loads(json.dumps(d))).to_json())
    assert StartupRecord.never_healthy().to_json() == never
    warm = StartupRecord.from_json(STARTUP_WARM)
    assert warm.healthy and warm.figures() == {
        "load_s": 0.09,
        "server_startup_s": 2.87,
        "startup_s": 3.122764727,
        "warmup_s": 0.21,
        "warmup_requests": 2,
    }
    cold = StartupRecord.from_json(STARTUP)
    assert cold.figures()["warmup_s"] is None and not StartupRecord.never_healthy().healthy
    assert not cold.serves_model and StartupRecord(health={"serves_model": True}).serves_model
    warm.write(tmp_path / "startup.json")
    _same(STARTUP_WARM, StartupRecord.read(tmp_path / "startup.json").to_json())


def test_run_json_round_trips_unchanged(tmp_path):
    point = AiperfPoint(
        point_id="tiny_c2",
        workload="tiny",
        concurrency=2,
        isl=16,
        osl=4,
        request_count=4,
        warmup_request_count=1,
    )
    verdict = {
        "ok": True,
        "reasons": [],
        "warnings": ["osl_mismatch_count 1"],
        "osl_mismatch_count": 1.0,
        "expected_requests": 4,
        "profiling_records": 4,
        "warmup_records": 1,
        "error_records": 0,
        "request_count": 4.0,
        "dataset_sha256": "8e" * 32,
        "random_seed": 42,
        "aiperf_version": "0.13.0",
        "exit_code": 0,
    }
    d = {
        "point": point.to_dict(),
        "argv": ["aiperf", "profile"],
        "input_file_sha256": None,
        "command": "aiperf profile",
        "env": {"HF_HUB_OFFLINE": "<unset>", "TMPDIR": "/tmp/qf-aiperf-1-x"},
        "started_ns": 1,
        "ended_ns": 2,
        "exit_code": 0,
        "verdict": verdict,
        "dataset_sha256": "8e" * 32,
    }
    run = PointRun.from_json(json.loads(json.dumps(d)))
    assert run.point == point and run.ok and run.verdict.warnings == ["osl_mismatch_count 1"]
    _same(d, run.to_json())
    run.write(tmp_path / "run.json")
    _same(d, PointRun.read(tmp_path / "run.json").to_json())
    assert PointRun.read(tmp_path / "absent.json") is None
    part = PointRun.from_json(
        {"command": "aiperf profile ...", "verdict": {"ok": False, "reasons": ["boom"]}}
    )
    assert not part.ok and part.verdict.reasons == ["boom"] and part.point is None


def test_run_ids():
    rid = run_id_of("embedded", "fp16", 1796155670821508577)
    assert rid == "embedded.fp16.20261201T200750Z"
    assert repeat_run_id(rid, 1) == rid and repeat_run_id(rid, 3) == rid + ".r3"
