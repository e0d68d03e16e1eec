"""One benchmark point through the Task API: `concurrency` requests in flight at a time, random
prompts of `input_len` tokens, greedy outputs of exactly `output_len` tokens; throughput, TTFT
and ITL."""

from __future__ import annotations

import asyncio
import random
import time

import numpy as np

from qualflow.runtime import FinalEvent, GenerationRequest, Task


async def one_request(task: Task, req: GenerationRequest) -> dict:
    t0 = time.perf_counter_ns()
    stamps = []
    async for ev in task.generate(req):
        if isinstance(ev, FinalEvent):
            final = ev
        else:
            stamps += [time.perf_counter_ns()] * len(ev.token_ids)
    itl = np.diff(stamps) / 1e6 if len(stamps) > 1 else np.array([])
    return {
        "ttft_ms": (stamps[0] - t0) / 1e6,
        "itl_ms": itl,
        "tokens": final.completion_tokens,
        "reason": final.finish_reason,
    }


async def run_point(
    task: Task, concurrency: int, input_len: int, output_len: int, requests: int, seed: int = 0
) -> dict:
    rng = random.Random(seed)
    sem = asyncio.Semaphore(concurrency)

    async def limited(i):
        ids = [rng.randrange(1000, 100_000) for _ in range(input_len)]
        params = task.default_params(max_new_tokens=output_len, temperature=0.0, ignore_eos=True)
        async with sem:
            return await one_request(task, GenerationRequest(f"bench-{i}", ids, params))

    t0 = time.perf_counter()
    res = await asyncio.gather(*[limited(i) for i in range(requests)])
    wall = time.perf_counter() - t0
    ttft = np.array([r["ttft_ms"] for r in res])
    itl = np.concatenate([r["itl_ms"] for r in res]) if res else np.array([])
    tokens = sum(r["tokens"] for r in res)
    bad = [r["reason"] for r in res if r["reason"] != "length"]
    if bad or tokens != requests * output_len:
        raise RuntimeError(
            f"benchmark requests did not all run to length: {bad[:3]}, {tokens} tokens"
        )
    pct = lambda a, q: float(np.percentile(a, q)) if len(a) else float("nan")  # noqa: E731
    return {
        "concurrency": concurrency,
        "input_len": input_len,
        "output_len": output_len,
        "requests": requests,
        "wall_s": wall,
        "output_tokens": tokens,
        "output_tok_per_s": tokens / wall,
        "ttft_ms_p50": pct(ttft, 50),
        "ttft_ms_p99": pct(ttft, 99),
        "itl_ms_p50": pct(itl, 50),
        "itl_ms_p99": pct(itl, 99),
    }
