"""GPU speed of the native Task against HF transformers on the same weights, and the bandwidth limit.

One run: writes a Qwen3-0.6B-shaped checkpoint with seeded random weights (speed does not depend on
weight values), pins it, builds the fp16 bundle, runs family correctness on cuda, runs the target
points through our Task and through HF `generate`, measures device-to-device copy bandwidth, prints a
table and writes JSON.

    python benchmarks/gpu_speed.py --work /tmp/gpu --out benchmarks/results
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import subprocess
import time
from pathlib import Path

import torch

from qualflow.artifacts.bundle import build_bundle
from qualflow.artifacts.pin import pin_checkpoint, write_pin
from qualflow.families.qwen3.synthetic import write_embedded
from qualflow.runtime import EngineConfig, load_task
from qualflow.runtime.bench_point import run_point

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
    runs = sorted(p for p in out.glob("*-NVIDIA-H200.json"))
    return json.loads(runs[-1].read_text()) if runs else {}


def copy_bandwidth(gb: float = 2.0) -> float:
    n = int(gb * 1e9) // 2
    a, b = torch.empty(n, dtype=torch.float16, device="cuda"), torch.empty(n, dtype=torch.float16, device="cuda")
    for _ in range(3):
        b.copy_(a)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10):
        b.copy_(a)
    e.record()
    torch.cuda.synchronize()
    return 2 * a.numel() * 2 * 10 / (s.elapsed_time(e) / 1e3) / 1e12  # TB/s, bytes read + written


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


def prepare_bundle(work: Path) -> Path:
    """The Qwen3-0.6B-shaped checkpoint (written once), its pin and its fp16 bundle; the checkpoint dir."""
    t = time.perf_counter()
    ckpt = write_embedded(work / "ckpt", "qwen3-0.6b") if not (work / "ckpt" / "config.json").exists() else work / "ckpt"
    pin = write_pin(pin_checkpoint(str(ckpt)), work / "pin.json")
    build_bundle(pin, "fp16", work / "bundle", force=True)
    print(f"checkpoint + bundle: {time.perf_counter() - t:.1f}s", flush=True)
    return ckpt


def machine() -> dict:
    return {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "driver": subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True).stdout.strip(),
            "model": "Qwen3-0.6B shape, seeded random weights, fp16", "points": {}}


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


def measure(task, result: dict, tag: str, names, save) -> None:
    """The named POINTS, then the offline workload, into result (saved after each)."""
    for name, c, isl, osl, target in POINTS:
        if name not in names:
            continue
        try:
            r = asyncio.run(run_point(task, c, isl, osl, requests=c if c > 1 else 3))
        except Exception as e:  # noqa: BLE001
            result["points"][name + tag] = {"error": repr(e)}
            print(f"{name}{tag} failed: {e!r}", flush=True)
            continue
        r["target"] = target
        r["met"] = all((r[k] >= v) if k.endswith("per_s") else (r[k] <= v) for k, v in target.items())
        r["preemptions_total"] = task.engine.scheduler.num_preemptions
        result["points"][name + tag] = r
        print(f"{name}{tag}: {r['output_tok_per_s']:.0f} tok/s  TTFT p50 {r['ttft_ms_p50']:.2f} ms  "
              f"ITL p50 {r['itl_ms_p50']:.3f} ms  target {target} met={r['met']}", flush=True)
        save()
    try:
        result["offline" + tag] = asyncio.run(offline_workload(task))
        print(f"offline{tag}: {result['offline' + tag]}", flush=True)
    except Exception as e:  # noqa: BLE001
        result["offline" + tag] = {"error": repr(e)}
        print(f"offline{tag} failed: {e!r}", flush=True)
    save()


def print_table(result: dict, prev: dict, bw: float, floor_ms: float) -> None:
    print("\n| point | ours tok/s | previous tok/s | HF tok/s | TTFT p50 ms | ITL p50 ms | target met |")
    print("|---|---|---|---|---|---|---|")
    for name, r in result["points"].items():
        if "error" in r:
            print(f"| {name} | error | | | | | |")
            continue
        p = prev.get("points", {}).get(name, {}).get("output_tok_per_s", float("nan"))
        print(f"| {name} | {r['output_tok_per_s']:.0f} | {p:.0f} | {r.get('hf_output_tok_per_s', float('nan')):.0f} | "
              f"{r['ttft_ms_p50']:.2f} | {r['itl_ms_p50']:.3f} | {r['met']} |")
    for tag in ("offline", "offline_mixed"):
        if tag in result and "error" not in result[tag]:
            print(f"| {tag} (nano-vllm bench) | {result[tag]['output_tok_per_s']:.0f} | - | - | - | - | {result[tag]['met']} |")
    print(f"copy bandwidth {bw:.2f} TB/s; weight-read floor {floor_ms:.3f} ms/step; load {result['load_s']:.1f}s + "
          f"compile/capture {result['graph_capture_s']:.1f}s (previous {prev.get('load_s', float('nan')):.1f} + "
          f"{prev.get('graph_capture_s', float('nan')):.1f}); warm {result.get('warm_load_s', float('nan')):.1f} + "
          f"{result.get('warm_graph_capture_s', float('nan')):.1f}")


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/qualflow-gpu")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--skip-mixed", action="store_true", help="no second load with mixed prefill + decode steps")
    ap.add_argument("--kv-cache-gb", type=float, default=0.0, help="KV pool size (0: half the free memory)")
    ap.add_argument("--max-num-batched-tokens", type=int, default=0, help="prefill token budget (0: the engine's)")
    ap.add_argument("--prev", default=None, help="folder of the previous committed runs (default: --out)")
    ap.add_argument("--deadline-s", type=float, default=1e9, help="skip the optional parts after this long")
    return ap.parse_args()


def main() -> int:
    a = parse_args()
    t_start = time.perf_counter()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    ckpt = prepare_bundle(work)
    result = machine()
    bw = copy_bandwidth()
    result["copy_bandwidth_tb_s"] = bw
    prev = previous_figures(Path(a.prev or a.out))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{dt.date.today().isoformat()}-{torch.cuda.get_device_name().replace(' ', '-')}.json"
    save = lambda: path.write_text(json.dumps(result, indent=2, default=float) + "\n")  # noqa: E731
    engine = EngineConfig(device="cuda", max_batch=256, max_context=2048 + 64, kv_cache_gb=a.kv_cache_gb,
                          max_num_batched_tokens=a.max_num_batched_tokens)
    task = load_task(work / "bundle", engine)
    result["load_s"], result["graph_capture_s"] = task.load_timing["load_s"], task.load_timing["graph_capture_s"]
    result["task_info"] = task.info
    print(f"task load {result['load_s']:.1f}s, compile + graph capture {result['graph_capture_s']:.1f}s  {task.info}", flush=True)
    params = sum(v.numel() for k, v in task.model.w.items())
    floor_ms = params * 2 / (bw * 1e12) * 1e3  # one decode step reads every weight once
    result["params"] = params
    result["weight_read_floor_ms"] = floor_ms
    result["graph_replay_ms"] = graph_replay_ms(task)
    print(f"graph replay ms/step: {result['graph_replay_ms']}", flush=True)
    save()
    result["correctness"] = correctness(task, ckpt)
    save()
    measure(task, result, "", [p[0] for p in POINTS], save)
    task.close()
    del task
    torch.cuda.empty_cache()

    late = lambda: time.perf_counter() - t_start > a.deadline_s  # noqa: E731
    if not a.skip_mixed and not late():  # second load: Inductor's cache is warm now; mixed prefill + decode steps
        task = load_task(work / "bundle", dataclasses.replace(engine, mixed=True))
        result["warm_load_s"], result["warm_graph_capture_s"] = task.load_timing["load_s"], task.load_timing["graph_capture_s"]
        print(f"warm start: load {result['warm_load_s']:.1f}s, compile + capture {result['warm_graph_capture_s']:.1f}s", flush=True)
        measure(task, result, "_mixed", ["c64_isl1024_osl256", "c256_isl128_osl128"], save)
        task.close()
        del task
        torch.cuda.empty_cache()

    if not a.skip_hf and not late():
        for name, c, isl, osl, _ in POINTS[:2]:
            h = hf_point(ckpt, c, isl, osl if c > 1 else 64)
            result["points"][name]["hf_output_tok_per_s"] = h["output_tok_per_s"]
            result["points"][name]["speedup_vs_hf"] = result["points"][name]["output_tok_per_s"] / h["output_tok_per_s"]
            print(f"HF {name}: {h['output_tok_per_s']:.0f} tok/s", flush=True)
        save()

    print_table(result, prev, bw, floor_ms)
    save()
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
