"""The serving session's failure paths: a server that cannot start and a busy port fail the session
with a clear message, and leave no process and no bound port behind."""
from __future__ import annotations

import json
import socket

from qualflow.session.server_process import port_is_free
from qualflow.session.run import run_session

POINTS = [{"point_id": "tiny_c1", "concurrency": 1, "isl": 8, "osl": 4, "request_count": 2}]


def _run(tmp_path, port, bundle):
    return run_session(bundle=str(bundle), out=tmp_path / "s", device="cpu", host="127.0.0.1", port=port,
                       model_name="m", points=POINTS, startup_timeout_s=120, warmup_requests=1,
                       warmup_max_tokens=2)


def test_server_that_dies_fails_the_session(tmp_path, capsys):
    rc = _run(tmp_path, 0, tmp_path / "no-such-bundle")
    assert rc == 1
    s = json.loads((tmp_path / "s" / "session.json").read_text())
    assert s["error"].startswith("ServerCrashed") and "exited with code" in s["error"]
    assert "server stopped" in capsys.readouterr().out
    port = int(s["url"].rsplit(":", 1)[1])
    assert port_is_free("127.0.0.1", port)
    assert not (tmp_path / "s" / "startup.json").exists()


def test_busy_port_is_named(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        rc = _run(tmp_path, port, tmp_path / "whatever")
    assert rc == 1
    err = json.loads((tmp_path / "s" / "session.json").read_text())["error"]
    assert err.startswith("PortConflict") and f"127.0.0.1:{port} is already in use" in err
