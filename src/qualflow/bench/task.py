"""`qualflow bench task` (`qualflow bench-task`, its old name): throughput and latency through the
Task API (a benchmark, not a test).

The flags are BenchConfig's fields, the engine's included (EngineConfig, except max-context: the
engine is sized to the point, prompt + output). The engine gets at least `concurrency` batch slots.
This module is light at import (the CLI builds every stage's flags on each call); the Task and the
measurement are imported when the benchmark runs."""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
from dataclasses import dataclass, field

from qualflow.configs import add_arguments, from_args, setting
from qualflow.runtime.config import EngineConfig

_ENGINE_SKIP = ("max_context",)


@dataclass(frozen=True)
class BenchConfig:
    bundle: str = setting(help="bundle directory (qualflow build --out)")
    concurrency: int = setting(1, help="requests in flight at a time")
    input_len: int = setting(128, help="prompt tokens per request (random ids)")
    output_len: int = setting(128, help="output tokens per request (greedy, never stopping early)")
    requests: int = setting(0, help="total requests (0: the concurrency)")
    json: str | None = setting(None, help="also write the figures as JSON here")
    engine: EngineConfig = field(default_factory=EngineConfig)

    def total_requests(self) -> int:
        return self.requests or self.concurrency

    def engine_config(self) -> EngineConfig:
        """The engine as configured, with room for the point: `concurrency` slots at least, and a
        context of exactly prompt + output (+ 8)."""
        return dataclasses.replace(
            self.engine,
            max_batch=max(self.engine.max_batch, self.concurrency),
            max_context=self.input_len + self.output_len + 8,
        )


def add_bench_args(p: argparse.ArgumentParser) -> None:
    add_arguments(p, BenchConfig, skip=_ENGINE_SKIP)


def main_bench_task(args: argparse.Namespace) -> int:
    return run_bench(from_args(BenchConfig, args))


def run_bench(cfg: BenchConfig) -> int:
    import asyncio

    from qualflow.runtime import load_task

    from .point import run_point

    engine = cfg.engine_config()
    engine.apply_to_this_process()  # as `qualflow serve` does: the Task runs in this program
    task = load_task(cfg.bundle, engine)
    c, isl = cfg.concurrency, cfg.input_len
    try:
        asyncio.run(run_point(task, min(2, c), min(16, isl), 4, min(2, c)))  # warm-up
        r = asyncio.run(run_point(task, c, isl, cfg.output_len, cfg.total_requests()))
    finally:
        task.close()
    r.update(_provenance(task))
    _print_figures(r, task.info)
    if cfg.json:
        with open(cfg.json, "w") as f:
            json.dump(r, f, indent=2)
    return 0


def _provenance(task) -> dict:
    import torch

    name = (
        torch.cuda.get_device_name()
        if task.device.type == "cuda"
        else platform.processor() or platform.machine()
    )
    return {
        "device": str(task.device),
        "device_name": name,
        "torch": torch.__version__,
        "bundle_hash": task.manifest.get("bundle_hash"),
        **task.info,
        **task.load_timing,
    }


def _print_figures(r: dict, info: dict) -> None:
    print(
        f"bench task  {info['device']} {info['effective_precision']}  concurrency "
        f"{r['concurrency']}  ISL {r['input_len']} OSL {r['output_len']}  requests {r['requests']}"
    )
    print(f"  output tokens/s   {r['output_tok_per_s']:10.1f}")
    print(f"  TTFT ms p50/p99   {r['ttft_ms_p50']:10.2f} / {r['ttft_ms_p99']:.2f}")
    print(f"  ITL  ms p50/p99   {r['itl_ms_p50']:10.3f} / {r['itl_ms_p99']:.3f}")
    print(f"  load s            {r['load_s']:10.2f}   graph capture s {r['graph_capture_s']:.2f}")
