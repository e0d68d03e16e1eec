"""The engine benchmark's points, measured through a loaded Task: each in steady state (repeats of
whole waves after a calibration wave, the median with its spread) beside its roofline, and
nano-vllm's offline workload."""

from __future__ import annotations

import asyncio
import math
import random
import statistics
import time

from qualflow.roofline import point_roofline, workload_roofline
from qualflow.runtime import GenerationRequest

from .point import run_point
from .step_log import lone_prefills

POINTS = [  # (name, concurrency, ISL, OSL, target)
    ("c1_isl128_osl256", 1, 128, 256, {"output_tok_per_s": 1000, "itl_ms_p50": 1.0}),
    ("c64_isl128_osl128", 64, 128, 128, {"output_tok_per_s": 28000, "itl_ms_p50": 2.3}),
    ("c256_isl128_osl128", 256, 128, 128, {"output_tok_per_s": 40000}),
    ("c1_isl1024_ttft", 1, 1024, 8, {"ttft_ms_p50": 6.0}),
    ("c64_isl1024_osl256", 64, 1024, 256, {"output_tok_per_s": 16000}),  # the pilot's, Task level
]
OFFLINE_TARGET = 25000


def scheduler_of(task):
    """The Task's engine scheduler (its step and preemption counts); None when the engine runs in
    its own process, out of reach."""
    return getattr(task.engine, "scheduler", None)


async def offline_workload(task, n: int = 256, seed: int = 0) -> dict:
    """nano-vllm's bench.py through the Task: 256 sequences, prompt of random ids in [0, 10000] and
    output length each uniform on [100, 1024], ignore_eos, all submitted at once; output tok/s."""
    rng = random.Random(seed)
    reqs = []
    for i in range(n):
        ids = [rng.randint(0, 10000) for _ in range(rng.randint(100, 1024))]
        reqs.append(
            GenerationRequest(
                f"offline-{i}",
                ids,
                task.default_params(
                    max_new_tokens=rng.randint(100, 1024), temperature=0.0, ignore_eos=True
                ),
            )
        )

    async def one(r):
        final = None
        async for ev in task.generate(r):
            final = ev
        return final

    sched = scheduler_of(task)
    steps0 = (sched.num_prefill_steps, sched.num_decode_steps) if sched else (0, 0)
    t0 = time.perf_counter()
    finals = await asyncio.gather(*[one(r) for r in reqs])
    wall = time.perf_counter() - t0
    tokens = sum(f.completion_tokens for f in finals)
    assert tokens == sum(r.params.max_new_tokens for r in reqs), (
        "offline requests did not all run to length"
    )
    return {
        "requests": n,
        "input_lens": [len(r.prompt_token_ids) for r in reqs],
        "output_lens": [r.params.max_new_tokens for r in reqs],
        "output_tokens": tokens,
        "wall_s": wall,
        "output_tok_per_s": tokens / wall,
        "preemptions": sched.num_preemptions if sched else None,
        "prefill_steps": sched.num_prefill_steps - steps0[0] if sched else None,
        "decode_steps": sched.num_decode_steps - steps0[1] if sched else None,
        "target": {"output_tok_per_s": OFFLINE_TARGET},
        "met": tokens / wall >= OFFLINE_TARGET,
    }


def steady_point(task, c: int, isl: int, osl: int, min_s: float, min_repeats: int) -> dict:
    """One point in steady state: an unmeasured calibration wave (c requests, 3 when c is 1), then
    repeats of the same number of waves, each repeat long enough that `min_repeats` of them give
    `min_s`; the median repeat's figures, with min/max of tok/s, TTFT p50 and ITL p50."""
    wave = c if c > 1 else 3
    calib = asyncio.run(run_point(task, c, isl, osl, requests=wave))
    waves = max(1, math.ceil(min_s / min_repeats / calib["wall_s"]))
    runs, total = [], 0.0
    while len(runs) < min_repeats or total < min_s:
        r = asyncio.run(run_point(task, c, isl, osl, requests=wave * waves, seed=len(runs) + 1))
        runs.append(r)
        total += r["wall_s"]
    keys = ("output_tok_per_s", "ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50", "itl_ms_p99")
    out = {k: runs[0][k] for k in ("concurrency", "input_len", "output_len")}
    out.update(
        {
            "requests": wave * waves,
            "repeats": len(runs),
            "measured_s": total,
            "output_tokens": sum(r["output_tokens"] for r in runs),
        }
    )
    for k in keys:
        vals = [r[k] for r in runs]
        out[k] = statistics.median(vals)
        out[k + "_min"], out[k + "_max"] = min(vals), max(vals)
    out["wall_s"] = statistics.median(r["wall_s"] for r in runs)
    return out


def _judged(task, r: dict, tag: str, target: dict, result: dict) -> dict:
    """A measured point with its target, preemptions and its roofline share."""
    r["target"], r["variant"] = target, tag
    r["met"] = all((r[k] >= v) if k.endswith("per_s") else (r[k] <= v) for k, v in target.items())
    sched = scheduler_of(task)
    r["preemptions_total"] = sched.num_preemptions if sched else None
    r["roofline"] = point_roofline(
        result["shape"], r["concurrency"], r["input_len"], r["output_len"], result
    )
    r["pct_of_roofline"] = 100 * r["output_tok_per_s"] / r["roofline"]["limit_tok_per_s"]
    r["pct_of_decode_roofline"] = (
        100 * r["output_tok_per_s"] / r["roofline"]["decode_limit_tok_per_s"]
    )
    return r


def _print_point(key: str, r: dict) -> None:
    print(
        f"{key}: {r['output_tok_per_s']:.0f} tok/s [{r['output_tok_per_s_min']:.0f}, "
        f"{r['output_tok_per_s_max']:.0f}] over {r['repeats']} x {r['requests']} req "
        f"({r['measured_s']:.1f}s)  TTFT p50 {r['ttft_ms_p50']:.2f} ms  "
        f"ITL p50 {r['itl_ms_p50']:.3f} ms  {r['pct_of_roofline']:.1f}% of roofline "
        f"{r['roofline']['limit_tok_per_s']:.0f}  met={r['met']}{_prefill_text(r)}",
        flush=True,
    )


def _prefill_text(r: dict) -> str:
    st = r.get("prefill_step")
    if not st or st["host_ms_p50"] is None:
        return ""
    dev = st["device_ms_p50"]
    return f"  prefill step: host {st['host_ms_p50']:.2f} ms" + (
        f", device {dev:.2f} ms" if dev is not None else ""
    )


def scaled(c: int, isl: int, osl: int, tiny: bool) -> tuple[int, int, int]:
    """A point's concurrency, ISL and OSL as a run measures it: on --tiny at most 4, 32 and 16."""
    return (min(c, 4), min(isl, 32), min(osl, 16)) if tiny else (c, isl, osl)


def measure(task, result: dict, tag: str, names, save, cfg, offline: bool = True) -> None:
    """The named POINTS (scaled for --tiny), then (`offline`) the offline workload, into result
    (saved after each). `cfg`: the run's EngineBenchConfig, resolved."""
    for name, c, isl, osl, target in POINTS:
        if name not in names:
            continue
        c, isl, osl = scaled(c, isl, osl, cfg.tiny)
        try:
            r = steady_point(task, c, isl, osl, cfg.min_seconds, cfg.min_repeats)
        except Exception as e:  # noqa: BLE001
            result["points"][name + tag] = {"error": repr(e)}
            print(f"{name}{tag} failed: {e!r}", flush=True)
            continue
        if c == 1:  # where its TTFT goes: the prefill step's host and device time
            r["prefill_step"] = lone_prefills(task, isl)
        result["points"][name + tag] = _judged(task, r, tag, target, result)
        _print_point(name + tag, r)
        save()
    if cfg.skip_offline or not offline:
        return
    try:
        off = result["offline" + tag] = asyncio.run(offline_workload(task))
        off["roofline"] = workload_roofline(
            result["shape"], off.pop("input_lens"), off.pop("output_lens"), result
        )
        off["pct_of_roofline"] = 100 * off["output_tok_per_s"] / off["roofline"]["limit_tok_per_s"]
        print(
            f"offline{tag}: {off['output_tok_per_s']:.0f} tok/s ({off['output_tokens']} tokens in "
            f"{off['wall_s']:.1f}s)  {off['pct_of_roofline']:.1f}% of roofline "
            f"{off['roofline']['limit_tok_per_s']:.0f}",
            flush=True,
        )
    except Exception as e:  # noqa: BLE001
        result["offline" + tag] = {"error": repr(e)}
        print(f"offline{tag} failed: {e!r}", flush=True)
    save()
