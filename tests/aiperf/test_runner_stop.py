"""How a running AIPerf is stopped: SIGINT to its process group, a graceful wait (it still
exports what it measured), then SIGKILL; with no request done there is nothing to export, so the
wait is short (AIPerf 0.13.0 cancelled while configuring hangs for about 30 s after it has given
up)."""

from __future__ import annotations

import subprocess
import sys
import time

from qualflow.aiperf.runner import EXPORT_GRACE_S, NOTHING_DONE_GRACE_S, _stop, stop_grace_s

# exits 0 half a second after SIGINT, as AIPerf does once it has exported
GRACEFUL = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGINT, lambda *a: (time.sleep(0.5), sys.exit(0)))\n"
    "print('ready', flush=True)\n"
    "time.sleep(120)\n"
)
# ignores SIGINT, as AIPerf's controller hanging in its loop's shutdown does
HANGING = (
    "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "print('ready', flush=True)\ntime.sleep(120)\n"
)


def spawn(code: str) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert p.stdout.readline().strip() == "ready"
    return p


def test_the_grace_is_short_only_when_no_request_is_done():
    assert stop_grace_s(0) == NOTHING_DONE_GRACE_S < EXPORT_GRACE_S
    assert stop_grace_s(1) == stop_grace_s(None) == EXPORT_GRACE_S


def test_a_run_that_stops_on_sigint_is_left_to_finish():
    p = spawn(GRACEFUL)
    _stop(p, stop_grace_s(5))
    assert p.returncode == 0  # it exited by itself, not killed


def test_a_run_with_nothing_done_that_hangs_is_killed_after_the_short_grace():
    p = spawn(HANGING)
    t0 = time.monotonic()
    _stop(p, stop_grace_s(0))
    took = time.monotonic() - t0
    assert p.returncode == -9
    assert NOTHING_DONE_GRACE_S <= took < EXPORT_GRACE_S, took
