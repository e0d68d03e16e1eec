"""The client tools a qualification's evidence rests on run at their pinned versions: the `aiperf`
that is first on PATH (asked for its version before each point) and the `openai` SDK the protocol
checks use. A mismatch is an error, or, when unpinned clients are allowed, a reason that caps the
status below `aiperf-qualified`."""

from __future__ import annotations

import shutil
import subprocess

from qualflow.aiperf.command import PINNED_AIPERF

PINNED_OPENAI = "3.57.0"


class ClientPinError(RuntimeError):
    pass


def aiperf_version(binary: str = "aiperf") -> str:
    path = shutil.which(binary)
    if path is None:
        raise ClientPinError(
            f"`{binary}` is not on PATH: install the pinned aiperf=={PINNED_AIPERF}"
        )
    try:
        r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise ClientPinError(f"could not ask {path} for its version: {e}") from None
    found = (r.stdout.strip().splitlines() or [""])[-1].strip()
    if r.returncode != 0 or not found:
        raise ClientPinError(
            f"{path} --version failed (exit {r.returncode}): {r.stderr.strip()[-300:]}"
        )
    return found.split()[-1]


def openai_version() -> str:
    import openai

    return openai.__version__


def check_pin(
    tool: str, found: str, pinned: str, allow_unpinned: bool, where: str = ""
) -> list[str]:
    """[] when `found` is the pinned version; else the capping reason (allowed) or
    ClientPinError."""
    if found == pinned:
        return []
    msg = f"{tool} {found}{f' ({where})' if where else ''} is not the pinned {tool}=={pinned}"
    if not allow_unpinned:
        raise ClientPinError(
            f"{msg}; install the pinned version or set allow_unpinned_client: true"
        )
    return [f"{msg} (allowed by allow_unpinned_client)"]


def check_aiperf(allow_unpinned: bool, binary: str = "aiperf") -> list[str]:
    return check_pin(
        "aiperf",
        aiperf_version(binary),
        PINNED_AIPERF,
        allow_unpinned,
        shutil.which(binary) or binary,
    )


def check_openai(allow_unpinned: bool) -> list[str]:
    return check_pin("openai", openai_version(), PINNED_OPENAI, allow_unpinned)
