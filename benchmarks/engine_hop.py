"""What the engine's own process costs a lone request, against the engine on a thread: the Task of one
bundle in each mode (EngineConfig.engine_process on / off), alternated, each run a loop of sequential
greedy requests for at least DURATION_S seconds. Per request, from the Task's own stamps:

  queue:      submitted (the Task call) -> first scheduled (the engine took it)    -- the hop in
  final hop:  finished (the engine's stop check) -> the FinalEvent at the caller    -- the hop out
  call:       the Task call -> the FinalEvent at the caller                        -- what a client sees

Prints each run's p50s and the median of the runs per mode; writes OUT (JSON). `--prev` prints the
newest earlier result beside it.
    python benchmarks/engine_hop.py BUNDLE OUT.json [--device cpu] [--repeats 2] [--duration-s 6] [--tokens 8]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from qualflow.runtime import EngineConfig, load_task
from qualflow.runtime.api.events import FinalEvent
from qualflow.runtime.api.request import GenerationRequest


async def _one(task, i: int, tokens: int) -> dict:
    params = task.default_params(max_new_tokens=tokens, temperature=0.0, ignore_eos=True)
    req = GenerationRequest(f"hop-{i}", [1000 + (i * 7 + k) % 5000 for k in range(32)], params)
    t0 = time.time_ns()
    async for ev in task.generate(req):
        if isinstance(ev, FinalEvent):
            now, t = time.time_ns(), ev.timing
            if ev.finish_reason != "length":
                raise RuntimeError(f"request {i} ended {ev.finish_reason}: {ev.error}")
            return {"queue_us": (t.first_scheduled_ns - t.submitted_ns) / 1e3,
                    "final_hop_us": (now - t.finished_ns) / 1e3, "call_us": (now - t0) / 1e3}
    raise RuntimeError(f"request {i} gave no final event")


async def _loop(task, duration_s: float, tokens: int) -> list[dict]:
    for i in range(5):   # warm-up
        await _one(task, -1 - i, tokens)
    out, end, i = [], time.monotonic() + duration_s, 0
    while time.monotonic() < end:
        out.append(await _one(task, i, tokens))
        i += 1
    return out


def run(bundle: str, mode: str, device: str, duration_s: float, tokens: int) -> dict:
    task = load_task(bundle, EngineConfig(device=device, engine_process=mode))
    try:
        rows = asyncio.run(_loop(task, duration_s, tokens))
    finally:
        task.close()
    p50 = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    return {"mode": mode, "requests": len(rows), **{f"{k}_p50": round(v, 1) for k, v in p50.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle")
    ap.add_argument("out")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--duration-s", type=float, default=6.0)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--prev", help="an earlier result of this script to print beside this one")
    a = ap.parse_args()
    runs = []
    for r in range(a.repeats):
        for mode in ("on", "off"):
            runs.append(res := run(a.bundle, mode, a.device, a.duration_s, a.tokens))
            print(f"run {r + 1} engine_process={mode}: {res['requests']} requests, queue p50 {res['queue_us_p50']} us, "
                  f"final hop p50 {res['final_hop_us_p50']} us, call p50 {res['call_us_p50']} us", flush=True)
    keys = ("queue_us_p50", "final_hop_us_p50", "call_us_p50")
    summary = {m: {k: statistics.median(x[k] for x in runs if x["mode"] == m) for k in keys} for m in ("on", "off")}
    result = {"device": a.device, "tokens": a.tokens, "duration_s": a.duration_s, "runs": runs, "median": summary}
    prev = json.loads(Path(a.prev).read_text())["median"] if a.prev and Path(a.prev).exists() else None
    for m in ("on", "off"):
        line = ", ".join(f"{k} {summary[m][k]:.0f}" + (f" (was {prev[m][k]:.0f})" if prev else "") for k in keys)
        print(f"median engine_process={m}: {line}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
