"""Exclusive GPUs on one host: each job that runs on `cuda` (a serving session, family correctness)
holds one GPU that no other running job holds, and the CPU cores that go with it. A leaf module: it
imports nothing from qualflow.

A lease is an exclusive `flock` on `<lock_dir>/gpu<index>.lock`, held on an open file for the whole
session. The kernel drops it when the process ends however it ends (crash, SIGKILL, Ctrl-C), so a
lock is never left behind. `device: cuda` takes any free GPU, `cuda:N` waits for GPU N. The session
runs its server with CUDA_VISIBLE_DEVICES set to the leased GPU, and, where the host allows, pins
itself (and so its server and AIPerf) to that GPU's share of the cores, so two sessions side by side
do not compete for the CPU their load generators need.

Devices come from `nvidia-smi` (restricted to CUDA_VISIBLE_DEVICES when a scheduler such as SLURM
set it), or from QUALFLOW_GPUS="index:uuid:name,..." (tests, hosts without nvidia-smi)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

DEFAULT_LOCK_DIR = "/tmp/qualflow-gpu-locks"  # QUALFLOW_GPU_LOCK_DIR overrides it


def lock_dir_default() -> Path:
    return Path(os.environ.get("QUALFLOW_GPU_LOCK_DIR") or DEFAULT_LOCK_DIR)


class GpuLeaseError(RuntimeError):
    pass


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str


def parse_gpus(text: str) -> list[Gpu]:
    """'index:uuid:name' entries, comma- or newline-separated (uuid and name may be left out)."""
    out = []
    for entry in text.replace("\n", ",").split(","):
        parts = [p.strip() for p in entry.split(":", 2)]
        if parts[0].isdigit():
            out.append(
                Gpu(
                    int(parts[0]),
                    parts[1] if len(parts) > 1 else "",
                    parts[2] if len(parts) > 2 else "",
                )
            )
    return out


def visible_gpus(env: dict | None = None) -> list[Gpu]:
    env = os.environ if env is None else env
    if env.get("QUALFLOW_GPUS"):
        gpus = parse_gpus(env["QUALFLOW_GPUS"])
    else:
        try:
            r = subprocess.run(
                ["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError):
            return []
        if r.returncode != 0:
            return []
        gpus = [
            Gpu(int(i), u.strip(), n.strip())
            for i, u, n in (
                ln.split(",", 2) for ln in r.stdout.strip().splitlines() if ln.count(",") >= 2
            )
        ]
    allowed = env.get("CUDA_VISIBLE_DEVICES")
    if allowed is not None and allowed.strip() and not env.get("QUALFLOW_GPUS"):
        keep = [a.strip() for a in allowed.split(",")]
        gpus = [g for g in gpus if str(g.index) in keep or g.uuid in keep]
    return gpus


def core_share(gpu_position: int, n_gpus: int, cores: list[int]) -> list[int]:
    """The cores that go with the gpu_position-th of n_gpus GPUs: an even, disjoint split."""
    if n_gpus <= 0 or not cores:
        return list(cores)
    per = max(1, len(cores) // n_gpus)
    share = cores[gpu_position * per : (gpu_position + 1) * per]
    return share or list(cores)


@dataclass
class GpuLease:
    gpu: Gpu
    lock_path: Path
    cores: list[int]
    _fd: int | None = None

    def env(self) -> dict:
        """The environment a process on this GPU runs with."""
        return {"CUDA_VISIBLE_DEVICES": self.gpu.uuid or str(self.gpu.index)}

    def record(self) -> dict:
        return {**asdict(self.gpu), "lock": str(self.lock_path), "cores": self.cores}

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the file drops the flock
            self._fd = None

    def __enter__(self) -> GpuLease:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _try_lock(path: Path, holder: dict) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, (json.dumps(holder) + "\n").encode())
    return fd


def holders(lock_dir: str | Path | None = None) -> list[dict]:
    """Who holds a GPU now (the holder record of every lock that is taken)."""
    out = []
    for p in sorted(Path(lock_dir or lock_dir_default()).glob("gpu*.lock")):
        fd = os.open(p, os.O_RDONLY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
                continue  # nobody holds it
            except BlockingIOError:
                pass
            try:
                out.append(json.loads(p.read_text() or "{}"))
            except ValueError:
                out.append({"lock": str(p)})
        finally:
            os.close(fd)
    return out


def acquire(
    device: str,
    *,
    gpus: list[Gpu] | None = None,
    lock_dir: str | Path | None = None,
    timeout_s: float = 3600.0,
    holder: dict | None = None,
    poll_s: float = 0.5,
) -> GpuLease:
    """Lease a GPU for `device` ('cuda': any free one; 'cuda:N': GPU N), waiting up to timeout_s."""
    gpus = visible_gpus() if gpus is None else gpus
    if not gpus:
        raise GpuLeaseError(
            f"device {device!r}: no GPU is visible (nvidia-smi found none; "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
        )
    if device == "cuda":
        wanted = gpus
    elif device.startswith("cuda:") and device[5:].isascii() and device[5:].isdigit():
        wanted = [g for g in gpus if g.index == int(device[5:])]
        if not wanted:
            raise GpuLeaseError(
                f"device {device!r}: no GPU {device[5:]} here (visible: {[g.index for g in gpus]})"
            )
    else:
        raise GpuLeaseError(f"device {device!r} is not 'cuda' or 'cuda:N'")
    lock_dir = Path(lock_dir or lock_dir_default())
    lock_dir.mkdir(parents=True, exist_ok=True)
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    info = {"pid": os.getpid(), "started_ns": time.time_ns(), **(holder or {})}
    deadline = time.monotonic() + timeout_s
    while True:
        for g in wanted:
            path = lock_dir / f"gpu{g.index}.lock"
            fd = _try_lock(path, {**info, "gpu": asdict(g)})
            if fd is not None:
                share = core_share([x.index for x in gpus].index(g.index), len(gpus), cores)
                return GpuLease(g, path, share, fd)
        if time.monotonic() > deadline:
            raise GpuLeaseError(
                f"device {device!r}: no GPU free after {timeout_s:.0f}s; held by "
                f"{holders(lock_dir)}"
            )
        time.sleep(poll_s)
