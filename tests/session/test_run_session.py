"""The serving session's failure paths: a server that cannot start, a busy port and a client tool at
the wrong version fail the session with a clear message recorded in session.json (stage, type,
message), and leave no process and no bound port behind; with record_failures every output is still
written and the raw artifacts are kept per run id."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
import stat

import pytest

from qualflow.runtime.config import EngineConfig
from qualflow.session.config import SessionConfig
from qualflow.session.run import run_session
from qualflow.session.server_process import port_is_free

POINTS = [{"point_id": "tiny_c1", "concurrency": 1, "isl": 8, "osl": 4, "request_count": 2}]


def _cfg(tmp_path, bundle, device="cpu", **kw) -> SessionConfig:
    return SessionConfig(
        bundle=str(bundle),
        out=str(tmp_path / "s"),
        points=json.dumps(POINTS),
        model_name="m",
        startup_timeout=120,
        warmup_requests=1,
        warmup_max_tokens=2,
        engine=EngineConfig(device=device),
        **kw,
    )


def _run(tmp_path, port, bundle, **kw):
    return run_session(_cfg(tmp_path, bundle, port=port, **kw))


def test_server_that_dies_fails_the_session(tmp_path, capsys):
    rc = _run(tmp_path, 0, tmp_path / "no-such-bundle")
    assert rc == 1
    s = json.loads((tmp_path / "s" / "session.json").read_text())
    assert s["error"]["stage"] == "startup" and s["error"]["type"] == "ServerCrashed"
    assert "exited with code" in s["error"]["message"]
    assert "server stopped" in capsys.readouterr().out
    port = int(s["url"].rsplit(":", 1)[1])
    assert port_is_free("127.0.0.1", port)
    assert json.loads((tmp_path / "s" / "startup.json").read_text())["healthy_ns"] is None


def test_busy_port_is_named(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        rc = _run(tmp_path, port, tmp_path / "whatever")
    assert rc == 1
    err = json.loads((tmp_path / "s" / "session.json").read_text())["error"]
    assert err["type"] == "PortConflict" and f"127.0.0.1:{port} is already in use" in err["message"]


def test_a_dead_sessions_aiperf_tmpdir_is_removed_when_the_next_session_starts(
    tmp_path, monkeypatch
):
    """Even a session that fails before any AIPerf point (here at a busy port) removes it."""
    from qualflow.aiperf import runner

    base = tmp_path / "tmp"
    dead = base / f"{runner.TMP_PREFIX}999999999-abc" / "ipc"  # a pid that cannot be alive
    dead.mkdir(parents=True)
    monkeypatch.setattr(runner, "_tmp_base", lambda: str(base))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        assert _run(tmp_path, sock.getsockname()[1], tmp_path / "whatever") == 1
    assert not dead.parent.exists()


def test_record_failures_writes_every_output_and_keeps_the_raw_artifacts(tmp_path):
    rc = _run(
        tmp_path,
        0,
        tmp_path / "no-such-bundle",
        record_failures=True,
        run_name=("embedded", "fp16"),
        archive_dir=str(tmp_path / "history"),
    )
    assert rc == 0
    out = tmp_path / "s"
    for name in (
        "session.json",
        "startup.json",
        "warmup.parquet",
        "protocol.parquet",
        "server_timing.jsonl",
        "provenance.json",
        "points",
    ):
        assert (out / name).exists(), name
    s = json.loads((out / "session.json").read_text())
    assert s["run_id"].startswith("embedded.fp16.") and s["error"]["type"] == "ServerCrashed"
    kept = tmp_path / "history" / s["run_id"]
    assert json.loads((kept / "session.json").read_text()) == s and (kept / "server.log").exists()


def test_a_wrong_aiperf_version_is_refused(tmp_path, bundle_dir, monkeypatch):
    fake = tmp_path / "bin" / "aiperf"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 0.12.1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    rc = _run(tmp_path, 0, bundle_dir, protocol=False)
    assert rc == 1
    s = json.loads((tmp_path / "s" / "session.json").read_text())
    assert s["error"]["stage"] == "aiperf:tiny_c1" and s["error"]["type"] == "ClientPinError"
    assert (
        "aiperf 0.12.1" in s["error"]["message"]
        and "pinned aiperf==0.13.0" in s["error"]["message"]
    )
    assert not (tmp_path / "s" / "points" / "tiny_c1" / "aiperf").exists()  # AIPerf never started
    assert port_is_free("127.0.0.1", int(s["url"].rsplit(":", 1)[1]))


def test_a_cuda_session_leases_a_free_gpu_and_records_it(tmp_path, monkeypatch, bundle_dir):
    """Fake GPUs (no CUDA here): the session takes the GPU nobody holds, gives its server only that
    one, records it and the other job, and frees it at the end (the server itself cannot start on a
    CPU-only torch, which the session records)."""
    from qualflow.gpus import acquire

    monkeypatch.setenv("QUALFLOW_GPUS", "0:GPU-aaa:Fake H200,1:GPU-bbb:Fake H200")
    monkeypatch.setenv("QUALFLOW_GPU_LOCK_DIR", str(tmp_path / "locks"))
    cores = os.sched_getaffinity(0)
    other = acquire("cuda:0", holder={"job": "other session"})
    try:
        rc = run_session(_cfg(tmp_path, bundle_dir, device="cuda", record_failures=True))
    finally:
        other.release()
    assert rc == 0
    s = json.loads((tmp_path / "s" / "session.json").read_text())
    assert (
        s["gpu"]["index"] == 1 and s["gpu"]["uuid"] == "GPU-bbb" and s["gpu"]["name"] == "Fake H200"
    )
    assert [h["job"] for h in s["other_gpu_jobs"]] == ["other session"]
    assert (
        "--device" in s["server_command"]
        and s["server_command"][s["server_command"].index("--device") + 1] == "cuda"
    )
    assert s["error"]["stage"] == "startup"
    with acquire("cuda:1", timeout_s=1):  # released
        pass
    assert s["gpu"]["cores"] and os.sched_getaffinity(0) == cores  # pinned for the session only


def test_collaborators_are_injected_and_the_session_records_their_outcome(tmp_path, bundle_dir):
    """The server comes from `server_factory` with the session's exact settings, each point's run
    from `point_runner`; session.json records the outcome of each run and the session's own
    command. A point marked harness_ceiling then runs once more (not per repeat), the stack's
    server stopped, on a second server from the factory: the synthetic engine on the same bundle,
    which really streams; that run failing is the ceiling's failure, and the session still
    succeeds."""
    import urllib.request

    from qualflow.aiperf.exports import Verdict
    from qualflow.aiperf.record import PointRun
    from qualflow.invocation import set_argv
    from qualflow.session.server_process import ServerProcess

    made, ran, streamed = [], [], []

    def factory(server, engine, *, log_path):
        made.append((server, engine))
        return ServerProcess(server, engine, log_path=log_path)

    def runner(point, client, *, point_dir, phase_header=None, options=None, **_):
        ran.append(
            (
                point.point_id,
                client.url,
                client.model_name,
                client.tokenizer,
                phase_header,
                options.workers_max,
                options.timeout_s,
                port_is_free("127.0.0.1", made[0][0].port),
            )
        )
        if "ceiling" in point_dir.parts:  # one real request to the synthetic server, then a failure
            body = json.dumps(
                {"model": "m", "input": "hi", "max_output_tokens": 3, "stream": True}
            ).encode()
            req = urllib.request.Request(
                client.url + "/v1/responses",
                body,
                {"content-type": "application/json", "x-qualflow-phase": phase_header},
            )
            streamed.append(urllib.request.urlopen(req, timeout=30).read().decode())
            raise RuntimeError("stand-in AIPerf failure")
        rec = PointRun(
            point=point,
            command="stand-in",
            exit_code=0,
            verdict=Verdict(ok=False, reasons=["stand-in"]),
        )
        point_dir.mkdir(parents=True, exist_ok=True)
        rec.write(point_dir / "run.json")
        return rec

    plan = [{**POINTS[0], "repeats": 2, "harness_ceiling": True}]
    (tmp_path / "points.json").write_text(json.dumps({"points": plan, "slos": {}}))
    set_argv(["session", "--points", str(tmp_path / "points.json")])
    try:
        cfg = dataclasses.replace(
            _cfg(
                tmp_path,
                bundle_dir,
                protocol=False,
                aiperf_workers=2,
                aiperf_timeout=60,
                ceiling_step_ms=2.0,
            ),
            points=str(tmp_path / "points.json"),
            engine=EngineConfig(max_batch=2),
        )
        rc = run_session(cfg, server_factory=factory, point_runner=runner)
    finally:
        set_argv([])
    assert rc == 0
    (server, engine), (ceiling_server, ceiling_engine) = made
    assert (
        engine == EngineConfig(max_batch=2)
        and server.bundle == str(bundle_dir)
        and server.model_name == "m"
    )
    assert server.timing_log == str(tmp_path / "s" / "server_timing.jsonl") and server.port != 0
    s = json.loads((tmp_path / "s" / "session.json").read_text())
    assert [r[0] for r in ran] == ["tiny_c1"] * 3
    assert [r[4] for r in ran] == ["aiperf:tiny_c1", "aiperf:tiny_c1.r2", "aiperf:tiny_c1"]
    assert ran[0][1:4] == (s["url"], "m", str(bundle_dir)) and ran[0][5:7] == (2, 60.0)
    assert s["points"] == {
        key: {"command": "stand-in", "exit_code": 0, "ok": False, "reasons": ["stand-in"]}
        for key in ("tiny_c1", "tiny_c1.r2")
    }
    assert s["command"] == f"qualflow session --points {tmp_path / 'points.json'}"
    assert s["settings"]["max_batch"] == 2 and "--max-batch" in s["server_command"]
    assert s["timing_records_missing"] == 0 and s["error"] is None
    # the harness ceiling: the synthetic engine on the same bundle and batch, after the stack's
    # server stopped
    assert ceiling_engine == EngineConfig(max_batch=2, engine_kind="synthetic", step_ms=2.0)
    assert ceiling_server.bundle == str(bundle_dir) and ceiling_server.port != server.port
    assert ran[2][1] == f"http://127.0.0.1:{ceiling_server.port}" and ran[2][2:4] == (
        "m",
        str(bundle_dir),
    )
    assert ran[2][7] and not ran[0][7]  # the stack's port: free during the ceiling's run only
    assert '"text":" token token token"' in streamed[0] and "response.incomplete" in streamed[0]
    c = s["ceiling"]
    argv = c["server_command"]
    assert c["step_ms"] == 2.0 and argv[argv.index("--engine") + 1] == "synthetic"
    assert argv[argv.index("--step-ms") + 1] == "2.0"
    assert c["error"] == {
        "stage": "ceiling:tiny_c1",
        "type": "RuntimeError",
        "message": "stand-in AIPerf failure",
    }
    timing = (tmp_path / "s" / "ceiling" / "server_timing.jsonl").read_text()
    assert '"tag": "aiperf:tiny_c1"' in timing
    assert port_is_free("127.0.0.1", ceiling_server.port) and port_is_free("127.0.0.1", server.port)


def _hashes(root) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_each_run_has_its_own_server_log_and_an_archive_no_later_run_changes(tmp_path):
    """Two sessions into the same directory and history: the first run's archived files keep
    their hashes, and the second run's log, archive and failure reason hold only its own server's
    lines."""
    history = tmp_path / "history"
    firsts = []
    for n in (1, 2):
        rc = _run(
            tmp_path,
            0,
            tmp_path / f"no-such-bundle-{n}",
            record_failures=True,
            run_name=("embedded", "fp16"),
            archive_dir=str(history),
        )
        assert rc == 0
        s = json.loads((tmp_path / "s" / "session.json").read_text())
        kept = history / s["run_id"]
        if n == 1:
            firsts = [kept, _hashes(kept)]
            assert "no-such-bundle-1" in (kept / "server.log").read_text()
    first, before = firsts
    assert kept != first and _hashes(first) == before
    log = (tmp_path / "s" / "server.log").read_text()
    assert "no-such-bundle-2" in log and "no-such-bundle-1" not in log
    assert "no-such-bundle-1" not in (kept / "server.log").read_text()
    assert "no-such-bundle-1" not in s["error"]["message"]
    assert (kept / "server.log").stat().st_ino != (tmp_path / "s" / "server.log").stat().st_ino


def test_a_failure_reason_is_one_line_and_the_log_tail_is_in_the_record(tmp_path):
    rc = _run(tmp_path, 0, tmp_path / "no-such-bundle", record_failures=True)
    assert rc == 0
    s = json.loads((tmp_path / "s" / "session.json").read_text())
    assert s["error"]["type"] == "ServerCrashed" and "\n" not in s["error"]["message"]
    assert (
        "exited with code" in s["error"]["message"] and "server_log_tail" in s["error"]["message"]
    )
    tail = s["server_log_tail"]
    assert isinstance(tail, list) and any("no-such-bundle" in ln for ln in tail), tail


def test_an_endpoint_cannot_have_a_harness_ceiling(tmp_path):
    """The ceiling is our server on the synthetic engine, which needs our bundle: refused before
    anything is written."""
    cfg = SessionConfig(
        out=str(tmp_path / "s"),
        points=json.dumps([{**POINTS[0], "harness_ceiling": True}]),
        endpoint=json.dumps({"url": "http://127.0.0.1:1", "model": "m"}),
    )
    with pytest.raises(ValueError, match="harness_ceiling needs our server's bundle"):
        run_session(cfg)
    assert not (tmp_path / "s").exists()
