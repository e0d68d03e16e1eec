"""A cycle's processes, from /proc (Linux): the tree under its snakemake, each process with the role
a fault may target, and every process it ever held (a watcher polls the tree), so that what is
left after the cycle is found by the cycle's own records, never by a name on the whole machine."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    start: int  # the kernel's start time (clock ticks since boot): a pid with another is reused
    argv: tuple[str, ...]


def _read(pid: int) -> Proc | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    if stat[0] == "Z":
        return None
    argv = tuple(a.decode(errors="replace") for a in raw.split(b"\0") if a)
    return Proc(pid, int(stat[1]), int(stat[19]), argv)


def table() -> dict[int, Proc]:
    """Every live (non-zombie) process."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit() and (p := _read(int(d))) is not None:
            out[p.pid] = p
    return out


def tree(root: int, procs: dict[int, Proc] | None = None) -> list[Proc]:
    """`root` and its live descendants."""
    procs = table() if procs is None else procs
    kids: dict[int, list[Proc]] = {}
    for p in procs.values():
        kids.setdefault(p.ppid, []).append(p)
    out, todo = [], [procs[root]] if root in procs else []
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p.pid, ()))
    return out


def _qualflow_stage(argv: tuple[str, ...]) -> str | None:
    """The stage of a `qualflow STAGE ...` (or `python -m qualflow[.cli] STAGE`) command line."""
    for i, a in enumerate(argv[:4]):
        module = i > 0 and argv[i - 1] == "-m" and a in ("qualflow", "qualflow.cli")
        if a.endswith("/qualflow") or a == "qualflow" or module:
            return argv[i + 1] if i + 1 < len(argv) else None
    return None


def _spawned(p: Proc) -> bool:
    """A multiprocessing child (spawn), not its resource tracker."""
    return any("spawn_main" in a for a in p.argv)


def role(p: Proc, procs: dict[int, Proc], root: int) -> str | None:
    """What a fault calls this process of the tree under `root`: snakemake (the root), session,
    server, engine (a server's first spawned child: its engine process, started before its API
    processes), api (its other spawned children), aiperf-worker (the process AIPerf titles `aiperf
    worker_<id>`), or None."""
    if p.pid == root:
        return "snakemake"
    stage = _qualflow_stage(p.argv)
    if stage in ("session", "serve"):
        return "session" if stage == "session" else "server"
    parent = procs.get(p.ppid)
    if parent is not None and _qualflow_stage(parent.argv) == "serve" and _spawned(p):
        first = min((q for q in procs.values() if q.ppid == p.ppid and _spawned(q)),
                    key=lambda q: (q.start, q.pid))  # fmt: skip
        return "engine" if first.pid == p.pid else "api"
    if p.argv and p.argv[0].startswith("aiperf worker_"):  # AIPerf's process titles
        return "aiperf-worker"
    return None


def live(p: Proc) -> bool:
    """The same process (pid and start time) is still alive."""
    q = _read(p.pid)
    return q is not None and q.start == p.start


class TreeWatcher:
    """Polls the tree under `root` until stopped; `seen` holds every process it ever held, `roles`
    the role of each it could name."""

    def __init__(self, root: int, period_s: float = 0.2):
        self.root, self.period_s = root, period_s
        self.seen: dict[tuple[int, int], Proc] = {}
        self.roles: dict[tuple[int, int], str] = {}
        self.ports: set[int] = set()  # every port a server of the tree listened on
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> TreeWatcher:
        self._thread.start()
        return self

    def poll(self) -> None:
        procs = table()
        with self._lock:
            for p in tree(self.root, procs):
                key = (p.pid, p.start)
                self.seen[key] = p
                if (r := role(p, procs, self.root)) is not None:
                    self.roles[key] = r
                if r == "server":
                    self.ports |= listening_ports({p.pid})

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self.period_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def find(self, wanted: str) -> list[Proc]:
        """The live processes of the tree with role `wanted`."""
        with self._lock:
            keys = [k for k, r in self.roles.items() if r == wanted]
            return [self.seen[k] for k in keys if live(self.seen[k])]

    def left(self) -> list[Proc]:
        """Every process it ever saw that is still alive."""
        with self._lock:
            return [p for p in self.seen.values() if live(p)]


def listening_ports(pids: set[int]) -> set[int]:
    """The TCP ports any of `pids` listens on (from their sockets and /proc/net/tcp*)."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    return {port for port, inode in _listeners() if inode in inodes}


def _listeners() -> list[tuple[int, str]]:
    out = []
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            f = ln.split()
            if f[3] == "0A":  # LISTEN
                out.append((int(f[1].rsplit(":", 1)[1], 16), f[9]))
    return out


def holders_of(ports: set[int]) -> list[int]:
    """The pids listening on any of `ports` (the whole machine: a port of ours someone holds)."""
    wanted = {inode for port, inode in _listeners() if port in ports}
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{d}/fd"):
                link = os.readlink(f"/proc/{d}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in wanted:
                    out.append(int(d))
                    break
        except OSError:
            continue
    return out


def wait_all_gone(procs: list[Proc], timeout_s: float) -> list[Proc]:
    """Those of `procs` still alive after up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while (left := [p for p in procs if live(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left
