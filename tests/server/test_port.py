"""One server per port: the socket is bound and listening before the model loads, so a second
`qualflow serve` on the port (also one started at the same moment) exits 2, an input error."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from qualflow.server import PortBusy, bind
from qualflow.session.server_process import free_port

pytestmark = pytest.mark.timeout(120)


def test_bind_listens_at_once_so_a_second_bind_fails():
    a = bind("127.0.0.1", 0)
    try:
        with pytest.raises(PortBusy, match="already in use"):
            bind("127.0.0.1", a.getsockname()[1])
    finally:
        a.close()


def serve(bundle, port, mode):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "qualflow.cli",
            "serve",
            "--bundle",
            str(bundle),
            "--port",
            str(port),
            "--engine-process",
            mode,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.mark.parametrize("mode", ["off", "on"], ids=["engine-thread", "engine-process"])
def test_two_servers_started_together_one_exits_2(bundle_dir, mode):
    port = free_port()
    procs = [serve(bundle_dir, port, mode), serve(bundle_dir, port, mode)]
    try:
        deadline = time.monotonic() + 60
        while all(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
        losers = [p for p in procs if p.poll() is not None]
        assert len(losers) == 1, [p.poll() for p in procs]
        assert losers[0].returncode == 2
        err = losers[0].stderr.read()
        assert f"port {port}" in err and "in use" in err
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)
