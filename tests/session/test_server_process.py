"""Server ownership used by the serving session: port conflicts named, health wait, crash noticed,
stop leaves no process and no bound port (with a stand-in server, no model)."""

from __future__ import annotations

import os
import socket
import sys
import textwrap

import pytest

from qualflow.session.server_process import (
    OwnedServer,
    PortConflict,
    ServerCrashed,
    ServerError,
    check_port,
    free_port,
    port_is_free,
)

FAKE = textwrap.dedent("""
    import http.server, json, subprocess, sys, time
    port = int(sys.argv[1]); delay = float(sys.argv[2])
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # a grandchild
    t0 = time.time()
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            ok = time.time() - t0 > delay
            body = json.dumps({"status": "ok" if ok else "loading", "load_s": 0.1}).encode()
            self.send_response(200 if ok else 503); self.end_headers(); self.wfile.write(body)
        def log_message(self, *a): pass
    print("child", child.pid, flush=True)
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
""")


def _server(tmp_path, port, delay=0.5, script=FAKE):
    f = tmp_path / "fake_server.py"
    f.write_text(script)
    return OwnedServer(
        [sys.executable, str(f), str(port), str(delay)],
        host="127.0.0.1",
        port=port,
        log_path=tmp_path / "server.log",
    )


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_port_conflict_is_named():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert not port_is_free("127.0.0.1", port)
        with pytest.raises(PortConflict, match=f"127.0.0.1:{port} is already in use"):
            check_port("127.0.0.1", port)


def test_start_health_stop_leaves_nothing(tmp_path):
    port = free_port()
    srv = _server(tmp_path, port)
    srv.start()
    try:
        health = srv.wait_healthy(30)
        assert health["status"] == "ok" and srv.healthy_ns > srv.spawn_ns
        srv.check_alive()
        child = int(
            next(
                ln
                for ln in (tmp_path / "server.log").read_text().splitlines()
                if ln.startswith("child")
            ).split()[1]
        )
        assert _alive(child)
    finally:
        srv.stop(grace_s=5)
    assert not _alive(srv.proc.pid) and not _alive(child)  # the whole process group is gone
    assert port_is_free("127.0.0.1", port)
    assert srv.stop() is not None  # idempotent


def test_crash_is_noticed_with_log_tail(tmp_path):
    srv = _server(tmp_path, free_port(), script="import sys; print('boom: no bundle'); sys.exit(3)")
    srv.start()
    with pytest.raises(ServerCrashed, match="exited with code 3(.|\n)*boom: no bundle"):
        srv.wait_healthy(30)
    srv.stop()


def test_health_timeout(tmp_path):
    srv = _server(tmp_path, free_port(), delay=60)
    srv.start()
    try:
        with pytest.raises(ServerError, match="not healthy after"):
            srv.wait_healthy(1.5)
    finally:
        srv.stop(grace_s=5)
    assert not _alive(srv.proc.pid)


def test_busy_port_refused_before_start(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        srv = _server(tmp_path, s.getsockname()[1])
        with pytest.raises(PortConflict):
            srv.start()
        assert srv.proc is None
    assert os.getpid()  # nothing started


def test_server_process_runs_qualflow_serve_with_exactly_its_configs(tmp_path):
    """The argv rebuilds the same two configs through `qualflow serve`'s own parser; `.cmd` is it
    quoted."""
    import argparse
    import shlex

    from qualflow.configs import from_args
    from qualflow.server import add_serve_args
    from qualflow.server.config import EngineConfig, ServerConfig
    from qualflow.session.server_process import ServerProcess

    server = ServerConfig(
        bundle="/b dir", port=free_port(), model_name="m", timing_log=str(tmp_path / "t.jsonl")
    )
    engine = EngineConfig(max_batch=3, max_context=0, engine_process="on", step_delay_s=0.01)
    srv = ServerProcess(server, engine, log_path=tmp_path / "server.log")
    assert srv.argv[:4] == [sys.executable, "-m", "qualflow.cli", "serve"]
    p = argparse.ArgumentParser()
    add_serve_args(p)
    ns = p.parse_args(srv.argv[4:])
    assert (from_args(ServerConfig, ns), from_args(EngineConfig, ns)) == (server, engine)
    assert shlex.split(srv.cmd) == srv.argv and (srv.host, srv.port) == ("127.0.0.1", server.port)
