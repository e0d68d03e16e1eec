"""Fixtures of the runtime's tests: running a kernel check in Triton's interpreter, and the
engine check that a projection kernel's one-row decode steps leave greedy output unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

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


ENGINE_CHECK = textwrap.dedent("""
    import sys
    from qualflow.runtime import EngineConfig, GenerationRequest, SamplingParams, load_task
    from qualflow.runtime.kernels import fused, {module}
    def reqs():
        params = SamplingParams(max_new_tokens=3, temperature=0, ignore_eos=True)
        prompts = [[1, 2, 3], [7] * 17]
        return [GenerationRequest(f"r{{i}}", p, params) for i, p in enumerate(prompts)]
    task = load_task(sys.argv[1], EngineConfig(max_batch=2, max_context=64))
    ref = [task.generate_sync(r).token_ids for r in reqs()]
    calls = []
    real, real_glu = {module}.{linear}, {module}.{glu}
    {module}.{linear} = lambda *a, **k: calls.append(a[0].shape[0]) or real(*a, **k)
    {module}.{glu} = lambda *a, **k: calls.append(("glu", a[0].shape[0])) or real_glu(*a, **k)
    task.model.ops = fused.FusedOps(use_triton=True, any_device=True, {ops})
    assert [task.generate_sync(r).token_ids for r in reqs()] == ref
    assert calls and set(calls) == {{1, ("glu", 1)}}, calls  # every one-row decode step's only
    task.close()
    print("ok")
""")


@pytest.fixture
def engine_check():
    """The script (for `run_interpreted`, argv: a bundle) that loads the bundle's Task, decodes
    two greedy requests (prompts of 3 and 17 tokens), then again with the ops `ops` (FusedOps
    keyword arguments) on Triton's kernels, counting the calls of `module`'s `linear` and `glu`
    forms: the output must be equal and the kernels called on one-row decode steps only."""

    def script(module: str, linear: str, glu: str, ops: str) -> str:
        return ENGINE_CHECK.format(module=module, linear=linear, glu=glu, ops=ops)

    return script
