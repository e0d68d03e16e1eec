"""GPU speed of the native Task against HF transformers on the same weights, against each point's
roofline, and overlapped scheduling A/B.

One run: writes a Qwen3-0.6B-shaped checkpoint with seeded random weights (speed does not depend on
weight values), pins it, builds the fp16 bundle, runs family correctness on cuda, runs the target
points through our Task (and, for two, HF `generate`), measures copy bandwidth and matmul peak,
prints a table next to the last committed run in --prev and writes JSON.

Each point runs in repeats of whole waves of `concurrency` requests until it has at least
--min-seconds of measured time and --min-repeats repeats (after an unmeasured calibration wave); it
stores the median of the repeats with their spread (min, max). `--async-scheduling ab` measures every
point with the engine stepping one step at a time and overlapped (key suffix `_async`) in one run.

    python benchmarks/gpu_speed.py --work /tmp/gpu --out benchmarks/results --async-scheduling ab
    # a tiny CPU smoke run of the same code (embedded tiny model, points scaled down):
    python benchmarks/gpu_speed.py --tiny --work /tmp/gpu-smoke --out /tmp/gpu-smoke/results --async-scheduling ab
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import math
import platform
import statistics
import subprocess
import time
from pathlib import Path

import torch

from qualflow.artifacts.bundle import build_bundle
from qualflow.artifacts.pin import pin_checkpoint, write_pin
from qualflow.families.qwen3.synthetic import write_embedded
from qualflow.runtime import EngineConfig, load_task
from qualflow.runtime.bench_point import run_point

from roofline import copy_bandwidth, matmul_tflops, model_shape, point_roofline

AB_POINTS = ("c1_isl128_osl256", "c64_isl128_osl128", "c256_isl128_osl128", "c64_isl1024_osl256")
POINTS = [  # (name, concurrency, ISL, OSL, target)
    ("c1_isl128_osl256", 1, 128, 256, {"output_tok_per_s": 1000, "itl_ms_p50": 1.0}),
    ("c64_isl128_osl128", 64, 128, 128, {"output_tok_per_s": 25000}),
    ("c256_isl128_osl128", 256, 128, 128, {}),
    ("c1_isl1024_ttft", 1, 1024, 8, {"ttft_ms_p50": 8.0}),
    ("c64_isl1024_osl256", 64, 1024, 256, {"output_tok_per_s": 20000}),  # the pilot's shape, Task level
]


async def offline_workload(task, n: int = 256, seed: int = 0) -> dict:
    """nano-vllm's bench.py through the Task: 256 sequences, prompt of random ids in [0, 10000] and
    output length each uniform on [100, 1024], ignore_eos, all submitted at once; output tok/s."""
    import random
    from qualflow.runtime import GenerationRequest
    rng = random.Random(seed)
    reqs = []
    for i in range(n):
        ids = [rng.randint(0, 10000) for _ in range(rng.randint(100, 1024))]
        reqs.append(GenerationRequest(f"offline-{i}", ids, task.default_params(
            max_new_tokens=rng.randint(100, 1024), temperature=0.0, ignore_eos=True)))

    async def one(r):
        final = None
        async for ev in task.generate(r):
            final = ev
        return final
    t0 = time.perf_counter()
    finals = await asyncio.gather(*[one(r) for r in reqs])
    wall = time.perf_counter() - t0
    tokens = sum(f.completion_tokens for f in finals)
    assert tokens == sum(r.params.max_new_tokens for r in reqs), "offline requests did not all run to length"
    return {"requests": n, "output_tokens": tokens, "wall_s": wall, "output_tok_per_s": tokens / wall,
            "preemptions": task.engine.scheduler.num_preemptions, "target": {"output_tok_per_s": 25000},
            "met": tokens / wall >= 25000}


def previous_figures(out: Path) -> dict:
    """The last committed Task-level run before this one (for the side-by-side table)."""
    runs = sorted(out.glob("*-NVIDIA-H200.json"))
    return json.loads(runs[-1].read_text()) if runs else {}


def hf_point(ckpt: Path, concurrency: int, isl: int, osl: int) -> dict:
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float16).cuda().eval()
    ids = torch.randint(1000, 100_000, (concurrency, isl), generator=torch.Generator().manual_seed(0)).cuda()
    kw = dict(max_new_tokens=osl, min_new_tokens=osl, do_sample=False, pad_token_id=0)
    model.generate(ids[:, :16], **{**kw, "max_new_tokens": 4, "min_new_tokens": 4})
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model.generate(ids, **kw)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    n = (out.shape[1] - isl) * concurrency
    del model
    torch.cuda.empty_cache()
    return {"output_tok_per_s": n / wall, "wall_s": wall}


def prepare_bundle(work: Path, shape: str) -> Path:
    """The checkpoint of that shape (written once), its pin and its fp16 bundle; the checkpoint dir."""
    t = time.perf_counter()
    ckpt = work / "ckpt"
    if not (ckpt / "config.json").exists():
        write_embedded(ckpt, shape)
    pin = write_pin(pin_checkpoint(str(ckpt)), work / "pin.json")
    build_bundle(pin, "fp16", work / "bundle", force=True)
    print(f"checkpoint + bundle: {time.perf_counter() - t:.1f}s", flush=True)
    return ckpt


def machine(device: torch.device, shape: str) -> dict:
    if device.type == "cuda":
        gpu, driver = torch.cuda.get_device_name(device), subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True).stdout.strip()
    else:
        gpu, driver = f"cpu-{platform.machine()}", None
    return {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "gpu": gpu,
            "torch": torch.__version__, "cuda": torch.version.cuda, "driver": driver,
            "model": f"{shape} shape, seeded random weights, fp16", "points": {}}


def graph_replay_ms(task) -> dict:
    """The GPU-side cost of one decode step (a captured graph replayed), without the host loop."""
    graphs, out = task.engine.runner.graphs, {}
    if graphs is None:
        return out
    for bs, ctx in ((1, 256), (64, 256), (64, 1280), (256, 256)):
        if bs not in graphs.graphs:
            continue
        nblk = -(-ctx // graphs.block_size)
        graphs.tables[:bs, :nblk] = torch.arange(1, 1 + bs * nblk, device="cuda").view(bs, nblk) % (task.engine.scheduler.blocks.num_blocks - 1) + 1
        graphs.lens[:bs] = ctx
        g, _ = graphs.graphs[bs]
        s_, e_ = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        g.replay()
        s_.record()
        for _ in range(30):
            g.replay()
        e_.record()
        torch.cuda.synchronize()
        out[f"b{bs}_ctx{ctx}"] = s_.elapsed_time(e_) / 30
        graphs.tables.zero_()
        graphs.lens.fill_(1)
        graphs.forget()
    return out


def correctness(task, ckpt: Path) -> dict:
    """Family correctness on cuda, recorded (an error is recorded too: the measurement goes on)."""
    try:
        from qualflow.correctness.criteria import run_correctness
        t = time.perf_counter()
        corr = run_correctness(task, str(ckpt))
        res = {"passed": int(corr.passed.sum()), "total": len(corr),
               "thresholds_version": corr.thresholds_version.iloc[0],
               "precision": corr.effective_precision.iloc[0],
               "max_rel_logit_diff": float(corr[corr.criterion == "max_rel_logit_diff"].measured.max()),
               "max_kl": float(corr[corr.criterion == "max_kl"].measured.max())}
        print(f"correctness {res} in {time.perf_counter() - t:.1f}s", flush=True)
        if not corr.passed.all():
            print(corr[~corr.passed].to_string())
        return res
    except Exception as e:  # noqa: BLE001 - record and go on measuring
        print(f"correctness failed to run: {e!r}", flush=True)
        return {"error": repr(e)}


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
    out.update({"requests": wave * waves, "repeats": len(runs), "measured_s": total,
                "output_tokens": sum(r["output_tokens"] for r in runs)})
    for k in keys:
        vals = [r[k] for r in runs]
        out[k] = statistics.median(vals)
        out[k + "_min"], out[k + "_max"] = min(vals), max(vals)
    out["wall_s"] = statistics.median(r["wall_s"] for r in runs)
    return out


def measure(task, result: dict, tag: str, names, save, opts: argparse.Namespace) -> None:
    """The named POINTS (scaled for --tiny), then the offline workload, into result (saved after each)."""
    shape = result["shape"]
    for name, c, isl, osl, target in POINTS:
        if name not in names:
            continue
        if opts.tiny:
            c, isl, osl = min(c, 4), min(isl, 32), min(osl, 16)
        try:
            r = steady_point(task, c, isl, osl, opts.min_seconds, opts.min_repeats)
        except Exception as e:  # noqa: BLE001
            result["points"][name + tag] = {"error": repr(e)}
            print(f"{name}{tag} failed: {e!r}", flush=True)
            continue
        r["target"] = target
        r["met"] = all((r[k] >= v) if k.endswith("per_s") else (r[k] <= v) for k, v in target.items())
        r["preemptions_total"] = task.engine.scheduler.num_preemptions
        r["roofline"] = point_roofline(shape, c, isl, osl, result)
        r["pct_of_roofline"] = 100 * r["output_tok_per_s"] / r["roofline"]["limit_tok_per_s"]
        r["pct_of_decode_roofline"] = 100 * r["output_tok_per_s"] / r["roofline"]["decode_limit_tok_per_s"]
        result["points"][name + tag] = r
        print(f"{name}{tag}: {r['output_tok_per_s']:.0f} tok/s [{r['output_tok_per_s_min']:.0f}, "
              f"{r['output_tok_per_s_max']:.0f}] over {r['repeats']} x {r['requests']} req ({r['measured_s']:.1f}s)  "
              f"TTFT p50 {r['ttft_ms_p50']:.2f} ms  ITL p50 {r['itl_ms_p50']:.3f} ms  "
              f"{r['pct_of_roofline']:.1f}% of roofline {r['roofline']['limit_tok_per_s']:.0f}  met={r['met']}", flush=True)
        save()
    if opts.skip_offline:
        return
    try:
        result["offline" + tag] = asyncio.run(offline_workload(task))
        print(f"offline{tag}: {result['offline' + tag]}", flush=True)
    except Exception as e:  # noqa: BLE001
        result["offline" + tag] = {"error": repr(e)}
        print(f"offline{tag} failed: {e!r}", flush=True)
    save()


def print_table(result: dict, prev: dict) -> None:
    """This run next to the previous one (same point name), with the spread and the roofline share."""
    print(f"\nprevious: {prev.get('date', 'none')} {prev.get('gpu', '')}")
    print("| point | tok/s (median) | [min, max] | previous tok/s | overlapped / one step at a time | % roofline "
          "| TTFT p50 ms (prev) | ITL p50 ms (prev) | HF tok/s | target met |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    nan = float("nan")
    for name, r in result["points"].items():
        if "error" in r:
            print(f"| {name} | error | | | | | | | |")
            continue
        p = prev.get("points", {}).get(name, {})
        base = result["points"].get(name.removesuffix("_async"), {}) if name.endswith("_async") else {}
        ab = r["output_tok_per_s"] / base["output_tok_per_s"] if "output_tok_per_s" in base else nan
        print(f"| {name} | {r['output_tok_per_s']:.0f} | [{r.get('output_tok_per_s_min', nan):.0f}, "
              f"{r.get('output_tok_per_s_max', nan):.0f}] | {p.get('output_tok_per_s', nan):.0f} | {ab:.2f} | "
              f"{r.get('pct_of_roofline', nan):.1f} | {r['ttft_ms_p50']:.2f} ({p.get('ttft_ms_p50', nan):.2f}) | "
              f"{r['itl_ms_p50']:.3f} ({p.get('itl_ms_p50', nan):.3f}) | {r.get('hf_output_tok_per_s', nan):.0f} | "
              f"{r['met']} |")
    for tag in [k for k in result if k.startswith("offline")]:
        if "error" not in result[tag]:
            p = prev.get(tag, {}).get("output_tok_per_s", nan)
            print(f"| {tag} (nano-vllm bench) | {result[tag]['output_tok_per_s']:.0f} | | {p:.0f} | | | | | | "
                  f"{result[tag]['met']} |")
    print(f"copy bandwidth {result['copy_bandwidth_tb_s']:.3f} TB/s (previous {prev.get('copy_bandwidth_tb_s', nan):.2f}); "
          f"matmul {result['matmul_tflops']:.1f} TFLOP/s; weight-read floor {result['weight_read_floor_ms']:.3f} ms/step; "
          f"load {result['load_s']:.1f}s + compile/capture {result['graph_capture_s']:.1f}s "
          f"(previous {prev.get('load_s', nan):.1f} + {prev.get('graph_capture_s', nan):.1f})")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/qualflow-gpu")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--skip-mixed", action="store_true", help="no second load with mixed prefill + decode steps")
    ap.add_argument("--skip-correctness", action="store_true", help="no family correctness run")
    ap.add_argument("--skip-offline", action="store_true", help="no nano-vllm offline workload")
    ap.add_argument("--kv-cache-gb", type=float, default=0.0, help="KV pool size (0: half the free memory)")
    ap.add_argument("--max-num-batched-tokens", type=int, default=0, help="prefill token budget (0: the engine's)")
    ap.add_argument("--async-scheduling", choices=("off", "on", "ab"), default="off",
                    help="the engine's overlapped scheduling: off, on, or ab (both, one after the other, "
                         "on the same bundle; the overlapped points get the suffix _async)")
    ap.add_argument("--points", default="",
                    help="comma-separated point names (default: all; with --async-scheduling ab: " + ",".join(AB_POINTS) + ")")
    ap.add_argument("--min-seconds", type=float, default=5.0, help="measured time per point, at least")
    ap.add_argument("--min-repeats", type=int, default=3, help="repeats per point, at least (median and spread)")
    ap.add_argument("--prev", default=None, help="folder of the previous committed runs (default: --out)")
    ap.add_argument("--deadline-s", type=float, default=1e9, help="skip the optional parts after this long")
    ap.add_argument("--tiny", action="store_true",
                    help="CPU smoke run: the embedded tiny model on cpu, points scaled to c<=4, ISL<=32, OSL<=16, "
                         "1 s per point, no HF, mixed, correctness or offline workload")
    a = ap.parse_args(argv)
    if a.tiny:
        a.skip_hf = a.skip_mixed = a.skip_correctness = a.skip_offline = True
        a.min_seconds = min(a.min_seconds, 1.0)
    return a


def device_figures(device: torch.device, tiny: bool) -> dict:
    bw = copy_bandwidth(device, 0.05 if tiny else 2.0)
    tf = matmul_tflops(device, 512 if tiny else 8192, torch.float32 if device.type == "cpu" else torch.float16)
    print(f"copy bandwidth {bw:.3f} TB/s, matmul {tf:.1f} TFLOP/s", flush=True)
    return {"copy_bandwidth_tb_s": bw, "matmul_tflops": tf}


def modes(opt: str) -> list[tuple[str, bool]]:
    """(key suffix, async_scheduling) of each engine the run measures."""
    return {"off": [("", False)], "on": [("_async", True)], "ab": [("", False), ("_async", True)]}[opt]


def first_load(task, result: dict, save) -> None:
    """What the first Task of the run records: load times, shape, floor and graph replay figures."""
    result["load_s"], result["graph_capture_s"] = task.load_timing["load_s"], task.load_timing["graph_capture_s"]
    result["task_info"] = task.info
    print(f"task load {result['load_s']:.1f}s, compile + graph capture {result['graph_capture_s']:.1f}s  {task.info}", flush=True)
    shape = model_shape(task)
    result["shape"], result["params"] = shape, shape["params"]
    result["weight_read_floor_ms"] = shape["weight_bytes"] / (result["copy_bandwidth_tb_s"] * 1e12) * 1e3
    if task.device.type == "cuda":
        result["graph_replay_ms"] = graph_replay_ms(task)
        print(f"graph replay ms/step: {result['graph_replay_ms']}", flush=True)
    save()


def run_modes(a, work: Path, engine: EngineConfig, ckpt: Path, result: dict, save) -> None:
    names = a.points.split(",") if a.points else list(AB_POINTS if a.async_scheduling == "ab" else [p[0] for p in POINTS])
    for i, (tag, overlapped) in enumerate(modes(a.async_scheduling)):
        task = load_task(work / "bundle", dataclasses.replace(engine, async_scheduling="on" if overlapped else "off"))
        if i == 0:
            first_load(task, result, save)
            if not a.skip_correctness:
                result["correctness"] = correctness(task, ckpt)
                save()
        measure(task, result, tag, names, save, a)
        task.close()
        del task
        if engine.device == "cuda":
            torch.cuda.empty_cache()


def main() -> int:
    a = parse_args()
    t_start = time.perf_counter()
    device = torch.device("cpu" if a.tiny else "cuda")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    ckpt = prepare_bundle(work, "tiny" if a.tiny else "qwen3-0.6b")
    result = machine(device, "tiny" if a.tiny else "Qwen3-0.6B")
    result.update(device_figures(device, a.tiny))
    result["async_scheduling"] = a.async_scheduling
    prev = previous_figures(Path(a.prev or a.out))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{dt.date.today().isoformat()}-{result['gpu'].replace(' ', '-')}.json"
    save = lambda: path.write_text(json.dumps(result, indent=2, default=float) + "\n")  # noqa: E731
    engine = EngineConfig(device=device.type, max_batch=8 if a.tiny else 256, max_context=2048 + 64,
                          kv_cache_gb=a.kv_cache_gb, max_num_batched_tokens=a.max_num_batched_tokens)
    run_modes(a, work, engine, ckpt, result, save)
    late = lambda: time.perf_counter() - t_start > a.deadline_s  # noqa: E731
    if not a.skip_mixed and not late():  # second load: Inductor's cache is warm now; mixed prefill + decode steps
        task = load_task(work / "bundle", dataclasses.replace(engine, mixed=True))
        result["warm_load_s"], result["warm_graph_capture_s"] = task.load_timing["load_s"], task.load_timing["graph_capture_s"]
        print(f"warm start: load {result['warm_load_s']:.1f}s, compile + capture {result['warm_graph_capture_s']:.1f}s", flush=True)
        measure(task, result, "_mixed", ["c64_isl1024_osl256", "c256_isl128_osl128"], save, a)
        task.close()
        del task
        torch.cuda.empty_cache()
    if not a.skip_hf and not late():
        hf_points(ckpt, result, save)
    print_table(result, prev)
    save()
    print(f"wrote {path}")
    return 0


def hf_points(ckpt: Path, result: dict, save) -> None:
    for name, c, isl, osl, _ in POINTS[:2]:
        if name not in result["points"] or "error" in result["points"][name]:
            continue
        h = hf_point(ckpt, c, isl, osl if c > 1 else 64)
        result["points"][name]["hf_output_tok_per_s"] = h["output_tok_per_s"]
        result["points"][name]["speedup_vs_hf"] = result["points"][name]["output_tok_per_s"] / h["output_tok_per_s"]
        print(f"HF {name}: {h['output_tok_per_s']:.0f} tok/s", flush=True)
    save()


if __name__ == "__main__":
    raise SystemExit(main())
