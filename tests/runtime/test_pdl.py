"""Programmatic dependent launch (runtime/kernels/pdl.py): where it applies, how a kernel is
launched with it, and what a Task reports when it does not apply."""

from __future__ import annotations

import argparse

import torch

from qualflow.configs import add_arguments, from_args
from qualflow.runtime import EngineConfig, load_task
from qualflow.runtime.kernels import pdl


def test_not_supported_off_cuda_and_launch_options():
    why = pdl.supported(torch.device("cpu"))
    assert why is not None and ("cpu is not cuda" in why or "grid dependency control" in why)
    assert pdl.options(True) == {"launch_pdl": True} and pdl.options(False) == {}


def test_the_flag_turns_it_off_and_the_task_says_so(bundle_dir):
    p = argparse.ArgumentParser()
    add_arguments(p, EngineConfig)
    assert from_args(EngineConfig, p.parse_args([])).programmatic_launch is True
    cfg = from_args(
        EngineConfig,
        p.parse_args(["--no-programmatic-launch", "--max-batch", "2", "--max-context", "64"]),
    )
    assert cfg.programmatic_launch is False
    task = load_task(bundle_dir, cfg)
    try:
        assert task.info["programmatic_launch"] == "off"
    finally:
        task.close()
