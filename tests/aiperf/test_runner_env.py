"""The environment every AIPerf run gets (aiperf.runner.aiperf_env)."""

from __future__ import annotations

import subprocess
import sys

from qualflow.aiperf.runner import aiperf_env


def test_aiperf_reads_the_fixed_environment(tmp_path, monkeypatch):
    """HF_HUB_OFFLINE is unset, TMPDIR is the run's own, and AIPerf itself reads the tokenizer
    pre-warm as skipped (the setting's name is AIPerf's, not a guess)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    env = aiperf_env(tmp_path)
    assert "HF_HUB_OFFLINE" not in env and env["TMPDIR"] == str(tmp_path)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from aiperf.common.environment import Environment; "
            "print(Environment.TOKENIZER.SKIP_PRELOAD)",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == "True"
