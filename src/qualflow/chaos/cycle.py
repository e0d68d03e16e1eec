"""One chaos cycle: `snakemake qualify` (the session forced to rerun) in the workflow copy with the
plan's faults injected, the checks on what it left, then a plain rerun and the checks again. The
cycle's processes are its snakemake's tree (procs.TreeWatcher); its temporary files go to a folder
of its own (TMPDIR), its GPU locks to another (QUALFLOW_GPU_LOCK_DIR)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from qualflow.aiperf.runner import TMP_PREFIX
from qualflow.lifetime import own_child

from . import checks, faults
from .procs import TreeWatcher, holders_of, wait_all_gone
from .schedule import DISK_FULL, CyclePlan

GRACE_S = 30  # after snakemake ends, how long its processes have to end on their own


@dataclass(frozen=True)
class Workflow:
    """The workflow copy a chaos run cycles in and the config it qualifies."""

    wf: Path
    configfile: str  # relative to wf
    sessions: tuple[Path, ...]  # each model/profile's session folder (relative to wf)
    evidence: tuple[Path, ...]
    status: Path

    def qualify(self, cores: int, *extra: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "snakemake",
            "--cores",
            str(cores),
            "qualify",
            "--configfile",
            self.configfile,
            *extra,
        ]


@dataclass
class Phase:
    """One snakemake run of a cycle and what it left."""

    returncode: int | None = None
    wall_s: float = 0.0
    left: list[str] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    watcher: TreeWatcher | None = None


def _env(wfl: Workflow, folder: Path) -> dict[str, str]:
    """A run's environment: the cycle's temporary folder (its faulted run and its rerun share it,
    as two runs share /tmp: the rerun removes what a killed run could not) and GPU lock folder;
    torch's compile cache (kept on purpose, not a temporary file) beside the cycles."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["TMPDIR"] = str(folder / "tmp")
    env["QUALFLOW_GPU_LOCK_DIR"] = str(folder / "gpu-locks")
    env["TORCHINDUCTOR_CACHE_DIR"] = str(wfl.wf.parent / "torchinductor")
    return env


def private_tmpdirs(pids: set[int], base: Path = Path("/tmp")) -> list[Path]:
    """The private AIPerf folders in `base` named for one of `pids` (a session of the cycle): in
    /tmp, where the cycle's TMPDIR is too long for AIPerf's sockets."""
    return [d for d in base.glob(f"{TMP_PREFIX}*-*") if d.name.split("-")[2] in map(str, pids)]


def run_snakemake(
    wfl: Workflow, cmd: list[str], folder: Path, name: str, timeout_s: float, on_start=None
) -> Phase:
    """Run `cmd` in the workflow copy, its output to <folder>/<name>.log, watching its tree;
    `on_start(watcher, t0)` starts the faults. After it ends, its processes get GRACE_S to end;
    those still alive are recorded and killed (they are ours: the watcher saw them in the tree)."""
    (folder / "tmp").mkdir(parents=True, exist_ok=True)
    ph = Phase()
    t0 = time.monotonic()
    with open(folder / f"{name}.log", "w") as log:
        p = subprocess.Popen(
            cmd,
            cwd=wfl.wf,
            env=_env(wfl, folder),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=own_child,  # a chaos run that dies takes its snakemake along
        )
    ph.watcher = TreeWatcher(p.pid).start()
    if on_start is not None:
        on_start(ph.watcher, t0)
    try:
        p.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGINT)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    ph.watcher.stop()
    ph.returncode, ph.wall_s = p.returncode, time.monotonic() - t0
    seen = list(ph.watcher.seen.values())
    left = wait_all_gone(seen, GRACE_S)
    ph.left = [f"{q.pid} {' '.join(q.argv)[:80]}" for q in left]
    ph.ports = sorted(port for port in ph.watcher.ports if holders_of({port}))
    for q in left:
        try:
            os.kill(q.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return ph


def _after(
    wfl: Workflow, folder: Path, ph: Phase, failed: bool, excuse: str, tmp: list[Path] | None
) -> list[checks.Verdict]:
    """The checks after one run; `tmp`: the temporary folders that must be empty (None: not
    checked, after a faulted run whose rerun is still to clean up); `excuse`: why what a
    SIGKILLed Snakemake leaves (its lock, its own temporary folder) may be there."""
    out = []
    for ev in wfl.evidence:
        out.append(checks.status_truthful(wfl.wf / wfl.status, wfl.wf / ev, failed_run=failed))
        out.append(checks.accounted(wfl.wf / wfl.status, wfl.wf / ev))
    for s in wfl.sessions:
        out.append(
            checks.acknowledged_stored(
                wfl.wf / s / "server_timing.jsonl", wfl.wf / s / faults.STORE_FILE
            )
        )
    out.append(checks.no_locks(wfl.wf, (folder / "gpu-locks",), excused=excuse))
    out.append(checks.no_leftovers(ph.left, ph.ports, tmp, excused=excuse))
    return out


def run_cycle(
    wfl: Workflow, plan: CyclePlan, folder: Path, cores: int, timeout_s: float, tmpfs_size: str
) -> dict:
    """The cycle: the faulted run, its checks, the plain rerun, its checks. A dict of the record's
    fields (run.CycleRecord)."""
    folder.mkdir(parents=True, exist_ok=True)
    injections = [faults.Injection(f) for f in plan.faults]
    mounted, notes = [], []
    if any(f.kind == DISK_FULL for f in plan.faults):
        for s in wfl.sessions[:1]:
            why = faults.mount_tmpfs(wfl.wf / s, tmpfs_size)
            if why:
                notes.append(f"disk-full skipped: {why}")
            else:
                mounted.append(wfl.wf / s)
    stop = threading.Event()

    def start_faults(watcher, t0):
        for inj in injections:
            if inj.fault.kind == DISK_FULL and not mounted:
                inj.outcome = "skipped: no tmpfs"
                continue
            faults.start(inj, watcher, wfl.wf / wfl.sessions[0], stop, t0)

    cmd = wfl.qualify(cores, "--forcerun", "aiperf_profile")
    faulted = run_snakemake(wfl, cmd, folder, "cycle", timeout_s, start_faults)
    stop.set()
    for inj in injections:
        inj.done.wait(30)
    for m in mounted:
        faults.free(m)
    smk_killed = any(
        i.hit_at_s is not None and i.fault.target == "snakemake" and i.fault.signal == "SIGKILL"
        for i in injections
    )
    excuse = "Snakemake was SIGKILLed: it asks for --unlock" if smk_killed else ""
    first = _after(wfl, folder, faulted, faulted.returncode != 0, excuse, None)
    for m in mounted:
        faults.unmount(m)
    if smk_killed:  # what Snakemake asks for after its own SIGKILL, then the plain rerun
        run_snakemake(wfl, wfl.qualify(cores, "--unlock"), folder, "unlock", timeout_s)
    rerun = run_snakemake(wfl, wfl.qualify(cores), folder, "rerun", timeout_s)
    pids = {p.pid for ph in (faulted, rerun) for p in ph.watcher.seen.values()}
    tmps = [folder / "tmp", *private_tmpdirs(pids)]
    second = _after(wfl, folder, rerun, False, excuse, tmps)
    log = (folder / "rerun.log").read_text(errors="replace")
    second.insert(0, checks.rerun_completed(rerun.returncode, log))
    return {
        "faults": [i.outcome for i in injections],
        "notes": notes,
        "cycle_rc": faulted.returncode,
        "cycle_s": round(faulted.wall_s, 1),
        "rerun_s": round(rerun.wall_s, 1),
        "after_fault": first,
        "after_rerun": second,
    }
