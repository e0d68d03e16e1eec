"""Process lifetime rules: whoever owns a process also ends it. A leaf module: it imports nothing
from qualflow.

`die_with_parent` asks the kernel (PR_SET_PDEATHSIG) to SIGTERM the calling process when its parent
dies, so a server outlives neither its session nor a session its Snakemake job, even on SIGKILL;
`own_child` adds SIGINT's default disposition, for children that we stop with SIGINT.
`pass_signals_to_jobs` makes a signal sent to Snakemake's PID alone reach its jobs."""

from __future__ import annotations

import ctypes
import os
import signal
from pathlib import Path

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Deliver `sig` to this process when its parent exits (Linux; a no-op elsewhere). Safe to run
    between fork and exec (a Popen preexec_fn)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, sig)
    except (OSError, AttributeError):
        pass


def own_child() -> None:
    """The Popen preexec_fn of a child we own and may stop with SIGINT (AIPerf, a server): SIGINT's
    default disposition, then `die_with_parent`. A process started as a background job of a
    non-interactive shell (`qualflow qualify ... &`, a batch script) has SIGINT ignored, and an
    ignored signal stays ignored across fork and exec, so without this our SIGINT (or a Ctrl-C
    passed on) would never reach the child; a Python child then installs its KeyboardInterrupt
    handler as usual."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    die_with_parent()


def _proc_table() -> dict[int, tuple[int, int]]:
    """{pid: (parent pid, process group)} of every live process (from /proc; {} elsewhere)."""
    table = {}
    for p in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not p.name.isdigit():
            continue
        try:
            fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            table[int(p.name)] = (int(fields[1]), int(fields[2]))
    return table


def descendants_in_group(pid: int) -> list[int]:
    """The descendants of `pid` that share its process group: exactly the processes of `pid`'s tree
    that a terminal's Ctrl-C reaches. Processes that made their own group (a server, AIPerf) are
    left to their owners."""
    table = _proc_table()
    pgid = os.getpgid(pid)
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    out, todo = [], list(children.get(pid, ()))
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, ()))
        if table[p][1] == pgid:
            out.append(p)
    return out


def pass_signals_to_jobs(signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> None:
    """In Snakemake's process (its main thread, e.g. from `onstart`): on each of `signals`, first
    send it to this process's descendants in its process group, then run the handler that was there.

    Snakemake signals no local job itself: on SIGINT it raises KeyboardInterrupt in its main thread,
    on SIGTERM it sets a "graceful" flag, and in both cases waits for the running jobs' threads to
    finish (ThreadPoolExecutor.shutdown). Its job shells run in its own process group, so only a
    terminal's Ctrl-C (which signals the whole group) ever reached them; `kill PID`, `timeout`, a CI
    cancellation or a batch system's job end did not, and a job ran to its end. Passed on, the
    signal reaches every job as the terminal's would."""
    for sig in signals:
        previous = signal.getsignal(sig)

        def handler(signum, frame, previous=previous):
            for pid in descendants_in_group(os.getpid()):
                try:
                    os.kill(pid, signum)
                except (ProcessLookupError, PermissionError):
                    pass
            if callable(previous):
                previous(signum, frame)
            elif (
                previous != signal.SIG_IGN
            ):  # the default action: end this process as it would have
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(sig, handler)
