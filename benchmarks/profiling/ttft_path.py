"""Where a c1 request's time to first token goes, on an engine in this process (the bench engine's
setting: the Qwen3-0.6B shape of seeded random weights, fp16):

  python3 benchmarks/profiling/ttft_path.py WORK OUT.json [--tiny] [--requests N]

For each prompt length, N one-at-a-time requests of 4 output tokens, each split on one clock
(time.perf_counter_ns) into:
  submit   the client's call until the engine took the request from its inbox;
  schedule from there until its prefill step's build began (the scheduler: prefix-cache lookup,
           blocks);
  build    the prefill steps' host side (the model runner's runs: inputs, launch or graph replay;
           from a chunked prompt's first step to its last);
  to_read  from there until the engine began to read the step's tokens back (the next step's
           launch, with overlapped scheduling);
  wait     the read-back's wait for the device;
  deliver  from the token's read until the client's loop had it;
and the prefill step's device time (CUDA events around the runner's call). Then one profiled
request a length (torch.profiler): its device kernels grouped by name, summed. Prints the medians
and writes them, with the kernel tables, to OUT.json."""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import io
import json
import pstats
import random
import statistics
import time
from pathlib import Path

import torch

from qualflow.bench.machine import prepare_bundle
from qualflow.runtime import EngineConfig, GenerationRequest, load_task

LENGTHS = (128, 1024)


class Stamps:
    """Engine-side stamps of the watched request, by wrapping the engine's own methods."""

    def __init__(self, engine):
        self.now: dict[str, int] = {}
        self.paths: dict[str, int] = {}  # the prefill steps' paths (model_runner.path)
        self.profile: cProfile.Profile | None = None  # set: the prefill steps' host calls
        runner, take, resolve = engine.runner, engine._take_inbox, engine._resolve
        real_run = runner.run

        def run(batch, *args):
            if batch.is_decode:
                return real_run(batch, *args)
            cuda = runner.device.type == "cuda"
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)] if cuda else []
            self.now.setdefault("build_0", time.perf_counter_ns())  # a chunked prompt's first
            ev and ev[0].record()
            self.profile and self.profile.enable()
            out = real_run(batch, *args)
            self.profile and self.profile.disable()
            ev and ev[1].record()
            self.now["build_1"] = time.perf_counter_ns()
            self.events, self.path = ev, runner.path
            return out

        def take_inbox(block):
            alive = take(block)
            self.now.setdefault("taken", time.perf_counter_ns())
            return alive

        def read(flight):
            first = "build_1" in self.now and "read_0" not in self.now  # the prompt's last step's
            if first:
                self.now["read_0"] = time.perf_counter_ns()
            resolve(flight)
            if first:
                self.now["read_1"] = time.perf_counter_ns()

        runner.run, engine._take_inbox, engine._resolve = run, take_inbox, read

    def reset(self) -> None:
        self.now, self.events, self.path = {}, [], ""


async def _one(task, stamps: Stamps, ids: list[int], i: int) -> dict:
    params = task.default_params(max_new_tokens=4, temperature=0.0, ignore_eos=True)
    stamps.reset()
    t0 = time.perf_counter_ns()
    first = None
    async for _ev in task.generate(GenerationRequest(f"ttft-{i}", ids, params)):
        first = first or time.perf_counter_ns()
    s = stamps.now
    dev = stamps.events[0].elapsed_time(stamps.events[1]) if stamps.events else None
    ms = lambda a, b: (b - a) / 1e6  # noqa: E731
    stamps.paths[stamps.path] = stamps.paths.get(stamps.path, 0) + 1
    return {
        "ttft": ms(t0, first),
        "submit": ms(t0, s["taken"]),
        "schedule": ms(s["taken"], s["build_0"]),
        "build": ms(s["build_0"], s["build_1"]),
        "to_read": ms(s["build_1"], s["read_0"]),
        "wait": ms(s["read_0"], s["read_1"]),
        "deliver": ms(s["read_1"], first),
        "device": dev,
    }


def _kernels(task, ids: list[int]) -> list[dict]:
    """One request's device kernels, by name: calls and total ms, the largest first."""
    from torch.profiler import ProfilerActivity, profile

    params = task.default_params(max_new_tokens=1, temperature=0.0, ignore_eos=True)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=acts) as prof:
        task.generate_sync(GenerationRequest("ttft-prof", ids, params))
    rows = []
    for e in prof.key_averages():
        dev_us = getattr(e, "device_time_total", 0) or 0
        if dev_us > 0 and e.device_type.name == "CUDA":
            rows.append({"name": e.key[:90], "calls": e.count, "ms": dev_us / 1e3})
    return sorted(rows, key=lambda r: -r["ms"])[:25]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("work")
    ap.add_argument("out")
    ap.add_argument("--tiny", action="store_true", help="the tiny shape on the CPU")
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--show-profile", action="store_true", help="print the host profiles")
    ap.add_argument("--solo", help="EngineConfig.solo_prefill_attention (default: the engine's)")
    a = ap.parse_args()
    prepare_bundle(Path(a.work), "tiny" if a.tiny else "qwen3-0.6b")
    cfg = EngineConfig(
        device="cpu" if a.tiny else "cuda", max_batch=8 if a.tiny else 256, max_context=2112,
        engine_process="off",
    )  # fmt: skip
    if a.solo:  # only then: a tree from before the setting runs this script too
        cfg = dataclasses.replace(cfg, solo_prefill_attention=a.solo)
    cfg.apply_to_this_process()
    task = load_task(Path(a.work) / "bundle", cfg)
    stamps, rng, out = Stamps(task.engine), random.Random(0), {}
    print({k: v for k, v in task.info.items() if "solo" in k or "varlen" in k}, flush=True)
    try:
        for isl in LENGTHS:
            prompt = lambda n=isl: [rng.randrange(1000, 100_000) for _ in range(n)]  # noqa: E731
            for i in range(5):  # warm-up
                asyncio.run(_one(task, stamps, prompt(), i))
            rows = [asyncio.run(_one(task, stamps, prompt(), i)) for i in range(a.requests)]
            med = {k: statistics.median(r[k] for r in rows if r[k] is not None) for k in rows[0]
                   if rows[0][k] is not None}  # fmt: skip
            stamps.profile = cProfile.Profile()
            for i in range(10):
                asyncio.run(_one(task, stamps, prompt(), i))
            text = io.StringIO()
            pstats.Stats(stamps.profile, stream=text).sort_stats("tottime").print_stats(14)
            stamps.profile = None
            out[f"isl{isl}"] = {"p50_ms": med, "paths": dict(stamps.paths)}
            out[f"isl{isl}"]["host_profile"] = text.getvalue()
            out[f"isl{isl}"]["kernels"] = _kernels(task, prompt())
            stamps.paths.clear()
            print(f"ISL {isl}: " + " | ".join(f"{k} {v:.3f}" for k, v in med.items()), flush=True)
            print(f"   prefill paths {out[f'isl{isl}']['paths']}")
            for k in out[f"isl{isl}"]["kernels"][:12]:
                print(f"   {k['ms']:8.3f} ms {k['calls']:5d}x  {k['name']}")
            print(text.getvalue().split("Ordered by")[1] if a.show_profile else "", end="")
    finally:
        task.close()
    out["info"] = {k: v for k, v in task.info.items() if isinstance(v, (str, int, float, bool))}
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
