"""`qualflow bench-task`: throughput and latency through the Task API (a benchmark, not a test)."""
from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import time

import numpy as np
import torch

from .task import Task, load_task
from .events import FinalEvent
from .request import GenerationRequest


async def _one(task: Task, req: GenerationRequest) -> dict:
    t0 = time.perf_counter_ns()
    stamps = []
    async for ev in task.generate(req):
        if isinstance(ev, FinalEvent):
            final = ev
        else:
            stamps += [time.perf_counter_ns()] * len(ev.token_ids)
    itl = np.diff(stamps) / 1e6 if len(stamps) > 1 else np.array([])
    return {"ttft_ms": (stamps[0] - t0) / 1e6, "itl_ms": itl, "tokens": final.completion_tokens,
            "reason": final.finish_reason}


async def run_point(task: Task, concurrency: int, input_len: int, output_len: int, requests: int,
                    seed: int = 0) -> dict:
    rng = random.Random(seed)
    sem = asyncio.Semaphore(concurrency)

    async def limited(i):
        ids = [rng.randrange(1000, 100_000) for _ in range(input_len)]
        params = task.default_params(max_new_tokens=output_len, temperature=0.0, ignore_eos=True)
        async with sem:
            return await _one(task, GenerationRequest(f"bench-{i}", ids, params))

    t0 = time.perf_counter()
    res = await asyncio.gather(*[limited(i) for i in range(requests)])
    wall = time.perf_counter() - t0
    ttft = np.array([r["ttft_ms"] for r in res])
    itl = np.concatenate([r["itl_ms"] for r in res]) if res else np.array([])
    tokens = sum(r["tokens"] for r in res)
    bad = [r["reason"] for r in res if r["reason"] != "length"]
    if bad or tokens != requests * output_len:
        raise RuntimeError(f"benchmark requests did not all run to length: {bad[:3]}, {tokens} tokens")
    pct = lambda a, q: float(np.percentile(a, q)) if len(a) else float("nan")  # noqa: E731
    return {"concurrency": concurrency, "input_len": input_len, "output_len": output_len,
            "requests": requests, "wall_s": wall, "output_tokens": tokens,
            "output_tok_per_s": tokens / wall, "ttft_ms_p50": pct(ttft, 50), "ttft_ms_p99": pct(ttft, 99),
            "itl_ms_p50": pct(itl, 50), "itl_ms_p99": pct(itl, 99)}


def main_bench_task(args: argparse.Namespace) -> int:
    slots = max(args.max_batch or args.concurrency, args.concurrency)
    task = load_task(args.bundle, device=args.device, max_batch=slots,
                     max_context=args.input_len + args.output_len + 8, eager=args.eager)
    try:
        asyncio.run(run_point(task, min(2, args.concurrency), min(16, args.input_len), 4, min(2, args.concurrency)))
        r = asyncio.run(run_point(task, args.concurrency, args.input_len, args.output_len,
                                  args.requests or args.concurrency))
    finally:
        task.close()
    r.update({"device": str(task.device), "device_name": torch.cuda.get_device_name() if task.device.type == "cuda"
              else platform.processor() or platform.machine(), "torch": torch.__version__,
              "bundle_hash": task.manifest.get("bundle_hash"), **task.info, **task.load_timing})
    print(f"bench-task  {task.info['device']} {task.info['effective_precision']}  concurrency {r['concurrency']}  "
          f"ISL {r['input_len']} OSL {r['output_len']}  requests {r['requests']}")
    print(f"  output tokens/s   {r['output_tok_per_s']:10.1f}")
    print(f"  TTFT ms p50/p99   {r['ttft_ms_p50']:10.2f} / {r['ttft_ms_p99']:.2f}")
    print(f"  ITL  ms p50/p99   {r['itl_ms_p50']:10.3f} / {r['itl_ms_p99']:.3f}")
    print(f"  load s            {r['load_s']:10.2f}   graph capture s {r['graph_capture_s']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=2)
    return 0
