"""Process lifetime rules: whoever owns a process also ends it. A leaf module: it imports nothing
from qualflow.

`die_with_parent` asks the kernel (PR_SET_PDEATHSIG) to SIGTERM the calling process when its parent
dies, so a server outlives neither its session nor a session its Snakemake job, even on SIGKILL."""
from __future__ import annotations

import ctypes
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Deliver `sig` to this process when its parent exits (Linux; a no-op elsewhere). Safe to run
    between fork and exec (a Popen preexec_fn)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, sig)
    except (OSError, AttributeError):
        pass
