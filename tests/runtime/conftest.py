"""Fixtures of the runtime's tests: running a kernel check in Triton's interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.fixture
def run_interpreted():
    """Runs Python `code` (with argv `args`) in a child with TRITON_INTERPRET=1 and asserts it
    exits 0 printing `ok` last; skips where triton is not installed."""
    pytest.importorskip("triton")

    def run(code: str, *args: str) -> None:
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        r = subprocess.run(
            [sys.executable, "-c", code, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]

    return run
