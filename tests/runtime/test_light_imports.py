"""The CLI builds every stage's flags on each call, from EngineConfig and the benchmarks' configs:
those modules, the public types and the package root's names must import without torch (the Task and
the engine are imported when they are first used)."""

from __future__ import annotations

import subprocess
import sys

LIGHT = [
    "qualflow.runtime",
    "qualflow.runtime.config",
    "qualflow.runtime.api.request",
    "qualflow.runtime.api.events",
    "qualflow.runtime.api.errors",
    "qualflow.runtime.api.capabilities",
    "qualflow.bench.task",
    "qualflow.bench.config",
]


def test_config_types_and_bench_flags_import_without_torch():
    code = (
        "import sys, argparse\n"
        + "".join(f"import {m}\n" for m in LIGHT)
        + "from qualflow.runtime import EngineConfig, GenerationRequest, SamplingParams\n"
        + "qualflow.bench.task.add_bench_args(argparse.ArgumentParser())\n"
        + "import qualflow.cli; qualflow.cli.build_parser()\n"
        + "heavy = sorted({'torch', 'numpy', 'triton'} & set(sys.modules))\n"
        + "print(','.join(heavy) or 'light')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "light", f"importing {LIGHT} imported {r.stdout.strip()}"


def test_the_root_still_resolves_every_public_name():
    import qualflow.runtime as runtime

    for name in runtime.__all__:
        assert getattr(runtime, name) is not None, name
    assert {
        "Task",
        "load_task",
        "EngineConfig",
        "GenerationRequest",
        "SamplingParams",
        "FinalEvent",
        "TokenEvent",
        "TaskTiming",
        "EngineFailed",
        "InvalidRequest",
        "PromptTooLong",
        "CapabilityMissing",
        "TaskError",
        "STREAMING",
        "TEXT_GENERATION",
        "SCORING",
    } <= set(runtime.__all__)
