"""CPU per thread of every process on the machine over a window, from /proc (Linux):

  python3 benchmarks/profiling/thread_cpu.py PID SECONDS OUT.json

Prints and writes each thread's CPU share of one core in the window (pid, tid, its process's
command line, and whether it belongs to PID's process tree), busiest first, and the total per
command. Thread ids match py-spy's `thread (TID)` labels, which name the Python thread."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _tree(pid: int) -> list[int]:
    """`pid` and every descendant (by /proc/*/stat parent links)."""
    parents: dict[int, int] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                parents[int(p.name)] = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, todo = [pid], [pid]
    while todo:
        parent = todo.pop()
        kids = [c for c, par in parents.items() if par == parent]
        found += kids
        todo += kids
    return found


def _threads(pids: list[int]) -> dict[tuple[int, int], float]:
    """CPU seconds (user + system) per (pid, tid) now."""
    out = {}
    for pid in pids:
        for t in Path(f"/proc/{pid}/task").glob("*"):
            try:
                f = (t / "stat").read_text().rsplit(")", 1)[1].split()
                out[(pid, int(t.name))] = (int(f[11]) + int(f[12])) / TICK
            except (OSError, IndexError, ValueError):
                pass
    return out


def _cmd(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120].strip()
    except OSError:
        return "?"


def _all() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def measure(pid: int, seconds: float) -> list[dict]:
    before, t0 = _threads(_all()), time.monotonic()
    time.sleep(seconds)
    after, dt = _threads(_all()), time.monotonic() - t0
    tree = set(_tree(pid))
    rows = [
        {
            "pid": p,
            "tid": t,
            "cpu_share": (after[(p, t)] - before.get((p, t), 0.0)) / dt,
            "command": _cmd(p),
            "in_tree": p in tree,
        }
        for (p, t) in after
    ]
    return sorted((r for r in rows if r["cpu_share"] > 0), key=lambda r: -r["cpu_share"])


def main(argv: list[str]) -> int:
    pid, seconds, out = int(argv[0]), float(argv[1]), Path(argv[2])
    rows = measure(pid, seconds)
    out.write_text(json.dumps({"pid": pid, "seconds": seconds, "threads": rows}, indent=1) + "\n")
    for r in rows[:24]:
        print(
            f"{100 * r['cpu_share']:6.1f}%  pid {r['pid']:>7} tid {r['tid']:>7} "
            f"{'*' if r['in_tree'] else ' '} {r['command'][:90]}"
        )
    per: dict[str, float] = {}
    for r in rows:
        per[r["command"][:90]] = per.get(r["command"][:90], 0.0) + r["cpu_share"]
    print("per command (cores):")
    for cmd, share in sorted(per.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {share:5.2f}  {cmd}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
