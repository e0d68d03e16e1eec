"""The cache-off rerun of a session: the points marked cache_off_rerun run again, after the
stack's, on a second server of ours with the stack's settings but its prefix cache off, its own
store, the session's API key, and its own directory and record; what the session cannot run as it
reads is refused before anything is written."""

from __future__ import annotations

import json

import pytest

from qualflow.runtime.config import EngineConfig
from qualflow.session.config import SessionConfig
from qualflow.session.run import run_session
from qualflow.session.server_process import port_is_free
from qualflow.session.state import session_keys

CHAINED = {
    "point_id": "chat_c1",
    "concurrency": 1,
    "isl": 8,
    "osl": 4,
    "request_count": 2,
    "conversation_num": 1,
    "conversation_turn_mean": 2,
    "chaining": "previous_response_id",
}


def _cfg(tmp_path, points, **kw) -> SessionConfig:
    return SessionConfig(
        out=str(tmp_path / "s"),
        points=json.dumps(points),
        model_name="m",
        startup_timeout=120,
        warmup_requests=1,
        warmup_max_tokens=2,
        engine=EngineConfig(device="cpu", cpu_threads=1),
        **kw,
    )


def test_the_rerun_runs_apart_on_a_server_without_prefix_caching(tmp_path, bundle_dir):
    from qualflow.aiperf.exports import Verdict
    from qualflow.aiperf.record import PointRun
    from qualflow.session.server_process import ServerProcess

    made, ran = [], []

    def factory(server, engine, *, log_path):
        made.append(ServerProcess(server, engine, log_path=log_path))
        return made[-1]

    def runner(point, client, *, point_dir, phase_header=None, **_):
        ran.append((point_dir, client, phase_header, port_is_free("127.0.0.1", made[0].port)))
        rec = PointRun(point=point, command="stand-in", exit_code=0, verdict=Verdict(ok=True))
        point_dir.mkdir(parents=True, exist_ok=True)
        rec.write(point_dir / "run.json")
        return rec

    plain = {**CHAINED, "point_id": "plain_c1", "chaining": None, "conversation_num": None}
    points = [{**CHAINED, "cache_off_rerun": True, "repeats": 2}, plain]
    cfg = _cfg(tmp_path, points, bundle=str(bundle_dir), state=True, protocol=False)
    assert run_session(cfg, server_factory=factory, point_runner=runner) == 0
    out = tmp_path / "s"
    stack, rerun = made
    # the stack's settings, the prefix cache off, a port, timing log and store of its own
    assert stack.engine.prefix_caching and not rerun.engine.prefix_caching
    assert rerun.engine == EngineConfig(device="cpu", cpu_threads=1, prefix_caching=False)
    assert "--no-prefix-caching" in rerun.argv and "--no-prefix-caching" not in stack.argv
    assert rerun.server.store.url == str(out / "cache_off" / "store.db")
    assert rerun.server.timing_log == str(out / "cache_off" / "server_timing.jsonl")
    assert rerun.server.api_key == stack.server.api_key and rerun.port != stack.port
    # the stack's runs, then the one rerun (not per repeat, not of the plain point), with the
    # session's API key, the stack's server stopped
    key = session_keys(stack.env)[0]
    assert [(d.relative_to(out).as_posix(), t) for d, _, t, _ in ran] == [
        ("points/chat_c1", "aiperf:chat_c1"),
        ("points/chat_c1.r2", "aiperf:chat_c1.r2"),
        ("points/plain_c1", "aiperf:plain_c1"),
        ("cache_off/points/chat_c1", "aiperf:chat_c1"),
    ]
    assert all(c.api_key == key for _, c, _, _ in ran)
    assert ran[3][1].url == rerun.url and ran[3][3] and not ran[0][3]
    s = json.loads((out / "session.json").read_text())
    assert set(s["points"]) == {"chat_c1", "chat_c1.r2", "plain_c1"}  # the stack's runs only
    c = s["cache_off"]
    assert c["points"]["chat_c1"]["ok"] and c["error"] is None and c["server_exit_code"] is not None
    assert c["settings"] == {"prefix_caching": False, "store": True}
    assert {"cache-off-startup", "cache-off:chat_c1"} <= set(s["stages"])
    assert s["error"] is None and s["timing_records_missing"] == 0 and "ceiling" not in s
    assert port_is_free("127.0.0.1", rerun.port) and port_is_free("127.0.0.1", stack.port)


def test_a_session_without_the_rerun_records_none(tmp_path):
    from qualflow.session.records import NOT_REACHED, SessionRecord

    assert SessionRecord().cache_off is NOT_REACHED
    assert "cache_off" not in SessionRecord().to_json()
    d = SessionRecord.from_json({"cache_off": {"points": {"p": {"ok": True}}}}).cache_off
    assert d.points["p"].ok and d.error is None


@pytest.mark.parametrize(
    ("point", "kw", "match"),
    [
        (CHAINED, {}, "chains with previous_response_id, which needs --state"),
        ({**CHAINED, "harness_ceiling": True}, {"state": True}, "no harness_ceiling"),
        (
            {**CHAINED, "cache_off_rerun": True, "chaining": None},
            {"endpoint": json.dumps({"url": "http://127.0.0.1:1", "model": "m"})},
            "cache_off_rerun restarts our server",
        ),
    ],
)
def test_what_the_session_cannot_run_is_refused_before_anything_is_written(
    tmp_path, point, kw, match
):
    cfg = _cfg(tmp_path, [point], bundle=None if "endpoint" in kw else "/b", **kw)
    with pytest.raises(ValueError, match=match):
        run_session(cfg)
    assert not (tmp_path / "s").exists()
