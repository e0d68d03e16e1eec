"""EngineConfig's flags: the settled A/B switches are left out of --help but stay settable, and a
session records them where set (unlike the hidden test-only knobs)."""

from __future__ import annotations

import argparse
import re

from qualflow.configs import add_arguments, from_args
from qualflow.runtime.config import EngineConfig

SETTLED = {
    "--mixed": "mixed",
    "--async-scheduling": "async_scheduling",
    "--fused-kernels": "fused_kernels",
    "--skinny-gemm-rows": "skinny_gemm_rows",
    "--programmatic-launch": "programmatic_launch",
    "--prefill-graphs": "prefill_graphs",
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_arguments(p, EngineConfig)
    return p


def test_settled_switches_are_left_out_of_help_but_settable():
    p = _parser()
    listed = set(re.findall(r"^\s+(--[a-z-]+)", p.format_help(), re.M))  # the options --help lists
    assert {"--max-batch", "--prefill-wait-factor", "--prefill-graph-tokens"} <= listed
    assert not listed & set(SETTLED)
    cfg = from_args(
        EngineConfig,
        p.parse_args(
            [
                "--mixed",
                "--async-scheduling",
                "off",
                "--no-fused-kernels",
                "--skinny-gemm-rows",
                "0",
                "--no-programmatic-launch",
                "--prefill-graphs",
                "on",
            ]
        ),
    )
    assert (
        cfg.mixed,
        cfg.async_scheduling,
        cfg.fused_kernels,
        cfg.skinny_gemm_rows,
        cfg.programmatic_launch,
        cfg.prefill_graphs,
    ) == (True, "off", False, 0, False, "on")


def test_settled_switches_are_recorded_where_set():
    from qualflow.session.settings import engine_settings

    settings = engine_settings(EngineConfig(mixed=True, skinny_gemm_rows=0))
    assert settings["mixed"] is True and settings["skinny_gemm_rows"] == 0
