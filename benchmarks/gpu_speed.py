"""GPU speed of the native Task against HF transformers on the same weights, against each point's
roofline, and overlapped scheduling A/B.

One run: writes a Qwen3-0.6B-shaped checkpoint with seeded random weights (speed does not depend on
weight values), pins it, builds the fp16 bundle, runs family correctness on cuda, runs the target
points through our Task (and, for two, HF `generate`), measures copy bandwidth and matmul peak,
prints a table next to the last committed run in --prev and writes JSON.

Each point runs in repeats of whole waves of `concurrency` requests until it has at least
--min-seconds of measured time and --min-repeats repeats (after an unmeasured calibration wave); it
stores the median of the repeats with their spread (min, max), its roofline (roofline.py) and its
share of it. A run loads the engine variants of its plan in turn (variants.py): `--plan v3` the
engine before issue 22's v3, with fused kernels, with prefill graphs and with mixed steps;
`--async-scheduling ab` (plan async) one step at a time and overlapped. Each load records its decode
step's GPU time and kernels (decode_step.py) and its greedy output against the plan's first variant
(equality.py). The run prints every point against its roofline and the previous committed run, the
A/B pairs and the variants (run_report.py), stores the same (`summary`, `variants`) in the JSON, and
exits 1 when a variant failed to load, differs from the baseline beyond a near-tie, or (cuda) did not
get the fused kernels or prefill graphs it asked for. The Task runs in this process (Task level).

    python benchmarks/gpu_speed.py --work /tmp/gpu --out benchmarks/results --plan v3 --skip-hf --skip-offline
    # a tiny CPU smoke run of the same code (embedded tiny model, points scaled down):
    python benchmarks/gpu_speed.py --tiny --work /tmp/gpu-smoke --out /tmp/gpu-smoke/results --plan v3
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import gc
import json
import math
import platform
import re
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

import decode_step
import equality
import results_schema
import run_report
from roofline import copy_bandwidth, matmul_tflops, model_shape, point_roofline
from variants import ASYNC_POINTS, plan

POINTS = [  # (name, concurrency, ISL, OSL, target)
    ("c1_isl128_osl256", 1, 128, 256, {"output_tok_per_s": 1000, "itl_ms_p50": 1.0}),
    ("c64_isl128_osl128", 64, 128, 128, {"output_tok_per_s": 28000, "itl_ms_p50": 2.3}),
    ("c256_isl128_osl128", 256, 128, 128, {"output_tok_per_s": 40000}),
    ("c1_isl1024_ttft", 1, 1024, 8, {"ttft_ms_p50": 6.0}),
    ("c64_isl1024_osl256", 64, 1024, 256, {"output_tok_per_s": 16000}),  # the pilot's shape, Task level
]


def scheduler_of(task):
    """The Task's engine scheduler (its step and preemption counts); None when the engine runs in its
    own process, out of reach."""
    return getattr(task.engine, "scheduler", None)


def variant_overrides(variant, tiny: bool) -> dict:
    """A variant's engine settings; on cpu (--tiny) prefill graphs `auto` become `on`: the padded step,
    run eagerly."""
    overrides = dict(variant.engine)
    if tiny and overrides.get("prefill_graphs") == "auto":
        overrides["prefill_graphs"] = "on"
    return overrides


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
    sched = scheduler_of(task)
    steps0 = (sched.num_prefill_steps, sched.num_decode_steps) if sched else (0, 0)
    t0 = time.perf_counter()
    finals = await asyncio.gather(*[one(r) for r in reqs])
    wall = time.perf_counter() - t0
    tokens = sum(f.completion_tokens for f in finals)
    assert tokens == sum(r.params.max_new_tokens for r in reqs), "offline requests did not all run to length"
    return {"requests": n, "output_tokens": tokens, "wall_s": wall, "output_tok_per_s": tokens / wall,
            "preemptions": sched.num_preemptions if sched else None,
            "prefill_steps": sched.num_prefill_steps - steps0[0] if sched else None,
            "decode_steps": sched.num_decode_steps - steps0[1] if sched else None,
            "target": {"output_tok_per_s": 25000},
            "met": tokens / wall >= 25000}


def previous_figures(out: Path, gpu: str) -> dict:
    """The newest committed Task-level run (an engine result: points and copy bandwidth) of this GPU
    model in its folder of `out`, by its date, as gpu_speed.py recorded it (the record's detail); the
    older tree's side of an A/B (a name ending in -old or -oldN) is not this code's past."""
    found = [r["detail"] for p, r in results_schema.runs(out, gpu, "engine")
             if not re.search(r"-old\d*$", p.stem)
             and "points" in r["detail"] and "copy_bandwidth_tb_s" in r["detail"]]
    return found[-1] if found else {}


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
            "git_sha": results_schema.git_sha(), "torch": torch.__version__, "cuda": torch.version.cuda, "driver": driver,
            "model": f"{shape} shape, seeded random weights, fp16", "points": {}}


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


def measure(task, result: dict, tag: str, names, save, opts: argparse.Namespace, offline: bool = True) -> None:
    """The named POINTS (scaled for --tiny), then (`offline`) the offline workload, into result (saved after each)."""
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
        r["target"], r["variant"] = target, tag
        r["met"] = all((r[k] >= v) if k.endswith("per_s") else (r[k] <= v) for k, v in target.items())
        sched = scheduler_of(task)
        r["preemptions_total"] = sched.num_preemptions if sched else None
        r["roofline"] = point_roofline(shape, c, isl, osl, result)
        r["pct_of_roofline"] = 100 * r["output_tok_per_s"] / r["roofline"]["limit_tok_per_s"]
        r["pct_of_decode_roofline"] = 100 * r["output_tok_per_s"] / r["roofline"]["decode_limit_tok_per_s"]
        result["points"][name + tag] = r
        print(f"{name}{tag}: {r['output_tok_per_s']:.0f} tok/s [{r['output_tok_per_s_min']:.0f}, "
              f"{r['output_tok_per_s_max']:.0f}] over {r['repeats']} x {r['requests']} req ({r['measured_s']:.1f}s)  "
              f"TTFT p50 {r['ttft_ms_p50']:.2f} ms  ITL p50 {r['itl_ms_p50']:.3f} ms  "
              f"{r['pct_of_roofline']:.1f}% of roofline {r['roofline']['limit_tok_per_s']:.0f}  met={r['met']}", flush=True)
        save()
    if opts.skip_offline or not offline:
        return
    try:
        result["offline" + tag] = asyncio.run(offline_workload(task))
        print(f"offline{tag}: {result['offline' + tag]}", flush=True)
    except Exception as e:  # noqa: BLE001
        result["offline" + tag] = {"error": repr(e)}
        print(f"offline{tag} failed: {e!r}", flush=True)
    save()


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/qualflow-gpu")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--suffix", default="",
                    help="appended to the result's name (<out>/<GPU model>/<date>-engine-<plan><suffix>.json)")
    ap.add_argument("--plan", choices=("async", "v3", "wait", "skinny", "pdl", "budget", "rows"), default="async",
                    help="the engine variants to load in turn (variants.py); async: per --async-scheduling")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--skip-mixed", action="store_true", help="plan async: no extra load with mixed prefill + decode steps")
    ap.add_argument("--skip-correctness", action="store_true", help="no family correctness run")
    ap.add_argument("--skip-offline", action="store_true", help="no nano-vllm offline workload")
    ap.add_argument("--skip-equality", action="store_true", help="no greedy probe of each variant against the first")
    ap.add_argument("--kv-cache-gb", type=float, default=0.0, help="KV pool size (0: half the free memory)")
    ap.add_argument("--max-num-batched-tokens", type=int, default=0, help="prefill token budget (0: the engine's)")
    ap.add_argument("--async-scheduling", choices=("off", "on", "ab"), default="on",
                    help="plan async: the engine's overlapped scheduling: on (the engine's default on cuda), off, or ab (both, one after the other, "
                         "on the same bundle; the overlapped points get the suffix _async)")
    ap.add_argument("--points", default="",
                    help="comma-separated point names, each variant's share of them (default: a variant's own; plan "
                         "async: all, with --async-scheduling ab: " + ",".join(ASYNC_POINTS) + ")")
    ap.add_argument("--engine-process", choices=("on", "off"), default="on",
                    help="on: after the variants (engine thread: probes, correctness, points), the variant of record's "
                         "points and offline workload again with the engine in its own process, as the Task runs on "
                         "cuda by default (tag suffix _proc)")
    ap.add_argument("--min-seconds", type=float, default=5.0, help="measured time per point, at least")
    ap.add_argument("--min-repeats", type=int, default=3, help="repeats per point, at least (median and spread)")
    ap.add_argument("--prev", default=None,
                    help="the committed results, one folder per GPU model, to print this run beside (default: --out)")
    ap.add_argument("--deadline-s", type=float, default=1e9,
                    help="after this long, later variants measure only their first point, and the optional parts are skipped")
    ap.add_argument("--tiny", action="store_true",
                    help="CPU smoke run: the embedded tiny model on cpu, points scaled to c<=4, ISL<=32, OSL<=16, "
                         "1 s per point, no HF, mixed, correctness or offline workload; prefill padding runs eagerly")
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


def first_load(task, result: dict, save) -> None:
    """What the first Task of the run records: load times, shape and the weight-read floor."""
    result["load_s"], result["graph_capture_s"] = task.load_timing["load_s"], task.load_timing["graph_capture_s"]
    result["task_info"] = task.info
    shape = model_shape(task)
    result["shape"], result["params"] = shape, shape["params"]
    result["weight_read_floor_ms"] = shape["weight_bytes"] / (result["copy_bandwidth_tb_s"] * 1e12) * 1e3
    save()


def load_figures(task, variant, a, base_probe: dict | None) -> tuple[dict, dict | None]:
    """One variant's load: its info, timings, decode-step figures and its greedy probe (compared with
    the baseline's when there is one). Returns (figures, probe)."""
    v = {"label": variant.label, "engine": variant.engine, "task_info": task.info,
         "load_s": task.load_timing["load_s"], "graph_capture_s": task.load_timing["graph_capture_s"]}
    print(f"[{variant.tag or 'plain'}] {variant.label}: load {v['load_s']:.1f}s, compile + capture "
          f"{v['graph_capture_s']:.1f}s  {task.info}", flush=True)
    if task.device.type == "cuda":
        v["graph_replay_ms"] = decode_step.graph_replay_ms(task)
        v["decode_kernels"] = decode_step.decode_kernels(task)
        k = v["decode_kernels"].get("b1_ctx256", {})
        print(f"  graph replay ms/step {v['graph_replay_ms']}; b1 kernels/step replay "
              f"{k.get('replay', {}).get('kernels_per_step')}, uncaptured {k.get('uncaptured', {}).get('kernels_per_step')}",
              flush=True)
    pr = None
    if not a.skip_equality:
        pr = equality.probe(task, base_probe, tiny=a.tiny)
        if base_probe is not None:
            v["equality"] = equality.compare(base_probe, pr, "float32" if task.device.type == "cpu" else "float16")
            print(f"  equality with the baseline: {v['equality']}", flush=True)
    return v, pr


def problems(result: dict, variants, cuda: bool) -> list[str]:
    """What makes the run fail loudly: a variant that did not load or measure, output that differs
    from the baseline beyond a near-tie, fused kernels, prefill graphs or programmatic launch asked for and
    not got (cuda)."""
    out = []
    for variant in variants:
        v = result["variants"].get(variant.tag, {})
        if "error" in v:
            out.append(f"{variant.tag}: {v['error']}")
            continue
        if v.get("equality") and not v["equality"]["passed"]:
            out.append(f"{variant.tag}: greedy output differs from {variants[0].tag} beyond a near-tie: {v['equality']}")
        info = v.get("task_info", {})
        if cuda and variant.engine.get("fused_kernels") and info.get("fused_kernels") != "triton":
            out.append(f"{variant.tag}: fused kernels asked for, got {info.get('fused_kernels')!r}")
        if cuda and variant.engine.get("prefill_graphs") == "auto" and not info.get("prefill_graphs"):
            out.append(f"{variant.tag}: prefill graphs asked for, none captured")
        if cuda and variant.engine.get("programmatic_launch") and info.get("programmatic_launch") != "on":
            out.append(f"{variant.tag}: programmatic launch asked for, got {info.get('programmatic_launch')!r}")
    out += [f"{k}: {r['error']}" for k, r in result["points"].items() if "error" in r]
    return out


def run_variants(a, work: Path, engine: EngineConfig, ckpt: Path, result: dict, save, t_start: float) -> list:
    variants, _ = plan(a.plan, a.async_scheduling)
    default = list(ASYNC_POINTS) if a.plan == "async" and a.async_scheduling == "ab" else [p[0] for p in POINTS]
    base_probe = None
    for i, variant in enumerate(variants):
        try:
            task = load_task(work / "bundle", dataclasses.replace(engine, **variant_overrides(variant, a.tiny)))
        except Exception as e:  # noqa: BLE001 - record, go on with the next variant
            result["variants"][variant.tag] = {"error": f"load failed: {e!r}"}
            print(f"[{variant.tag}] load failed: {e!r}", flush=True)
            continue
        try:
            if i == 0 or "load_s" not in result:
                first_load(task, result, save)
            v, pr = load_figures(task, variant, a, base_probe)
            base_probe = base_probe if base_probe is not None or i > 0 else pr
            result["variants"][variant.tag] = v
            if variant.main and not a.skip_correctness:
                v["correctness"] = result["correctness"] = correctness(task, ckpt)
            save()
            names = a.points.split(",") if a.points else list(variant.points or default)
            if time.perf_counter() - t_start > a.deadline_s:
                names = names[:1]
            measure(task, result, variant.tag, names, save, a, offline=variant.main or variant.offline)
        except Exception as e:  # noqa: BLE001
            result["variants"].setdefault(variant.tag, {})["error"] = f"failed: {e!r}"
            print(f"[{variant.tag}] failed: {e!r}", flush=True)
        finally:
            task.close()
            del task
            gc.collect()   # the engine's reference cycles, so that its pool goes back before the next load
            if engine.device == "cuda":
                torch.cuda.empty_cache()
    return list(variants)


def measure_engine_process(a, work: Path, engine: EngineConfig, result: dict, save) -> None:
    """The variant of record's points and offline workload with the engine in its own process (the
    Task's default on cuda: the caller's detokenizing and event delivery no longer share the engine's
    GIL). Its internals are out of reach there, so no probes and no preemption counts."""
    variants, _ = plan(a.plan, a.async_scheduling)
    main = next((v for v in variants if v.main), variants[0])
    tag = main.tag + "_proc"
    try:
        task = load_task(work / "bundle", dataclasses.replace(engine, **variant_overrides(main, a.tiny),
                                                              engine_process="on"))
    except Exception as e:  # noqa: BLE001 - record, the rest of the run stands
        result["variants"][tag] = {"error": f"load failed: {e!r}"}
        print(f"[{tag}] load failed: {e!r}", flush=True)
        return
    try:
        result["variants"][tag] = {"label": f"{main.label or main.tag}, engine process",
                                   "engine": {**main.engine, "engine_process": "on"}, "task_info": task.info,
                                   "load_s": task.load_timing["load_s"],
                                   "graph_capture_s": task.load_timing.get("graph_capture_s")}
        print(f"[{tag}] engine process: load {task.load_timing['load_s']:.1f}s  {task.info}", flush=True)
        save()
        names = a.points.split(",") if a.points else [p[0] for p in POINTS]
        measure(task, result, tag, names, save, a, offline=True)
    finally:
        task.close()


def main() -> int:
    a = parse_args()
    t_start = time.perf_counter()
    device = torch.device("cpu" if a.tiny else "cuda")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    ckpt = prepare_bundle(work, "tiny" if a.tiny else "qwen3-0.6b")
    result = machine(device, "tiny" if a.tiny else "Qwen3-0.6B")
    result.update(device_figures(device, a.tiny))
    result.update({"plan": a.plan, "async_scheduling": a.async_scheduling, "variants": {}})
    prev = previous_figures(Path(a.prev or a.out), result["gpu"])
    out = Path(a.out) / results_schema.gpu_dir(result["gpu"])
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{dt.date.today().isoformat()}-engine-{a.plan}{a.suffix}.json"
    save = lambda: path.write_text(json.dumps(results_schema.record(  # noqa: E731
        "engine", a.plan, result["gpu"], result["date"], result, result), indent=1, default=float) + "\n")
    engine = EngineConfig(device=device.type, max_batch=8 if a.tiny else 256, max_context=2048 + 64,
                          kv_cache_gb=a.kv_cache_gb, max_num_batched_tokens=a.max_num_batched_tokens,
                          engine_process="off")
    variants = run_variants(a, work, engine, ckpt, result, save, t_start)
    late = lambda: time.perf_counter() - t_start > a.deadline_s  # noqa: E731
    if a.engine_process == "on" and not late():
        measure_engine_process(a, work, engine, result, save)
        if engine.device == "cuda":
            torch.cuda.empty_cache()
    if a.plan == "async" and not a.skip_mixed and not late():  # Inductor's cache is warm now; mixed steps
        task = load_task(work / "bundle", dataclasses.replace(engine, mixed=True))
        result["warm_load_s"], result["warm_graph_capture_s"] = task.load_timing["load_s"], task.load_timing["graph_capture_s"]
        print(f"warm start: load {result['warm_load_s']:.1f}s, compile + capture {result['warm_graph_capture_s']:.1f}s", flush=True)
        measure(task, result, "_mixed", ["c64_isl1024_osl256", "c256_isl128_osl128"], save, a)
        task.close()
        del task
        torch.cuda.empty_cache()
    if not a.skip_hf and not late():
        hf_points(ckpt, result, save)
    result["summary"] = run_report.summary(result)
    result["problems"] = problems(result, variants, device.type == "cuda")
    run_report.print_points(result, prev)
    run_report.print_pairs(result, plan(a.plan, a.async_scheduling)[1])
    run_report.print_variants(result)
    run_report.print_device(result, prev)
    save()
    print(f"wrote {path}")
    if result["problems"]:
        print("\n" + "!" * 100 + "\nRUN FAILED:\n  " + "\n  ".join(result["problems"]) + "\n" + "!" * 100, flush=True)
        return 1
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
