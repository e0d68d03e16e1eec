"""A qualification started as a background job of a non-interactive shell (`qualflow qualify ... &`,
nohup, a batch script) runs with SIGINT ignored, and an ignored signal stays ignored in every child
it starts. AIPerf is stopped gracefully with SIGINT (runner._stop), so the runner's child must get
SIGINT's default disposition back: here the runner runs in a process started with SIGINT ignored
(as `bash -c 'x &'` starts it), and its AIPerf stand-in, a Python process that sets no handler of
its own, still dies of the SIGINT instead of being killed after the grace."""

from __future__ import annotations

import signal
import subprocess
import sys

# The runner's side, in a process whose SIGINT is ignored: start the stand-in as AIPerf is started,
# wait for it, stop it as AIPerf is stopped, print its exit code.
DRIVER = """
import sys, tempfile, time
from pathlib import Path
from qualflow.aiperf.runner import _start, _stop
tmp = Path(tempfile.mkdtemp())
up = tmp / "up"
child = "import sys, time; open(sys.argv[1], 'w').close(); time.sleep(120)"
proc, log = _start([sys.executable, "-c", child, str(up)], tmp, tmp / "aiperf.log")
deadline = time.monotonic() + 60
while not up.exists() and time.monotonic() < deadline:
    time.sleep(0.05)
_stop(proc, grace_s=20)
print(proc.returncode, flush=True)
"""


def _sigint_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_aiperf_dies_of_its_sigint_when_the_runner_was_started_with_sigint_ignored():
    out = subprocess.run(
        [sys.executable, "-c", DRIVER],
        preexec_fn=_sigint_ignored,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    # -SIGINT: the stand-in's KeyboardInterrupt ended it; -SIGKILL would be the grace running out
    assert int(out.stdout.split()[-1]) == -signal.SIGINT, out.stdout
