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
import datetime as dt
import json
import subprocess
import time
from pathlib import Path

import torch

from qualflow.artifacts.bundle import build_bundle
from qualflow.artifacts.pin import pin_checkpoint, write_pin
from qualflow.families.qwen3.synthetic import write_embedded
from qualflow.runtime import load_task
from qualflow.runtime.bench import run_point

POINTS = [  # (name, concurrency, ISL, OSL, target)
    ("c1_isl128_osl256", 1, 128, 256, {"output_tok_per_s": 1000, "itl_ms_p50": 1.0}),
    ("c64_isl128_osl128", 64, 128, 128, {"output_tok_per_s": 25000}),
    ("c1_isl1024_ttft", 1, 1024, 8, {"ttft_ms_p50": 15.0}),
]


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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/qualflow-gpu")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--eager-too", action="store_true", help="also measure eager mode at concurrency 1")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    ckpt = write_embedded(work / "ckpt", "qwen3-0.6b") if not (work / "ckpt" / "config.json").exists() else work / "ckpt"
    pin = write_pin(pin_checkpoint(str(ckpt)), work / "pin.json")
    build_bundle(pin, "fp16", work / "bundle", force=True)
    print(f"checkpoint + bundle: {time.perf_counter() - t:.1f}s", flush=True)

    result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "cuda": torch.version.cuda, "driver": subprocess.run(
                  ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                  capture_output=True, text=True).stdout.strip(),
              "model": "Qwen3-0.6B shape, seeded random weights, fp16", "points": {}}
    bw = copy_bandwidth()
    result["copy_bandwidth_tb_s"] = bw
    task = load_task(work / "bundle", device="cuda", max_batch=64, max_context=1024 + 256 + 16)
    result["load_s"], result["graph_capture_s"] = task.load_timing["load_s"], task.load_timing["graph_capture_s"]
    print(f"task load {result['load_s']:.1f}s, compile + graph capture {result['graph_capture_s']:.1f}s", flush=True)
    params = sum(v.numel() for k, v in task.model.w.items())
    floor_ms = params * 2 / (bw * 1e12) * 1e3  # one decode step reads every weight once
    result["params"] = params
    result["weight_read_floor_ms"] = floor_ms

    runner = task.engine.graphs  # the GPU-side cost of one decode step, without the host loop
    result["graph_replay_ms"] = {}
    for bs in (1, 64):
        g, _ = runner.graphs[(bs, runner.kv_buckets[0])]
        s_, e_ = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        g.replay()
        s_.record()
        for _ in range(50):
            g.replay()
        e_.record()
        torch.cuda.synchronize()
        result["graph_replay_ms"][bs] = s_.elapsed_time(e_) / 50
    print(f"graph replay ms/step (kv bucket {runner.kv_buckets[0]}): {result['graph_replay_ms']}", flush=True)

    from qualflow.correctness.criteria import run_correctness
    t = time.perf_counter()
    corr = run_correctness(task, str(ckpt))
    result["correctness"] = {"passed": int(corr.passed.sum()), "total": len(corr),
                             "thresholds_version": corr.thresholds_version.iloc[0],
                             "precision": corr.effective_precision.iloc[0],
                             "max_rel_logit_diff": float(corr[corr.criterion == "max_rel_logit_diff"].measured.max()),
                             "max_kl": float(corr[corr.criterion == "max_kl"].measured.max())}
    print(f"correctness {result['correctness']} in {time.perf_counter() - t:.1f}s", flush=True)
    if not corr.passed.all():
        print(corr[~corr.passed].to_string())

    for name, c, isl, osl, target in POINTS:
        r = asyncio.run(run_point(task, c, isl, osl, requests=c if c > 1 else 3))
        r["target"] = target
        r["met"] = all((r[k] >= v) if k.endswith("per_s") else (r[k] <= v) for k, v in target.items())
        r["fraction_of_bandwidth_limit"] = (r["output_tok_per_s"] / c) * floor_ms / 1e3 if c == 1 else None
        result["points"][name] = r
        print(f"{name}: {r['output_tok_per_s']:.0f} tok/s  TTFT p50 {r['ttft_ms_p50']:.2f} ms  "
              f"ITL p50 {r['itl_ms_p50']:.3f} ms  target {target} met={r['met']}", flush=True)
    task.close()
    del task
    torch.cuda.empty_cache()

    if a.eager_too:
        et = load_task(work / "bundle", device="cuda", max_batch=1, max_context=1024 + 256 + 16, eager=True)
        r = asyncio.run(run_point(et, 1, 128, 64, requests=2))
        result["eager_c1"] = r
        print(f"eager c1: {r['output_tok_per_s']:.0f} tok/s ITL p50 {r['itl_ms_p50']:.3f} ms", flush=True)
        et.close()
        del et
        torch.cuda.empty_cache()

    if not a.skip_hf:
        for name, c, isl, osl, _ in POINTS[:2]:
            h = hf_point(ckpt, c, isl, osl if c > 1 else 64)
            result["points"][name]["hf_output_tok_per_s"] = h["output_tok_per_s"]
            result["points"][name]["speedup_vs_hf"] = result["points"][name]["output_tok_per_s"] / h["output_tok_per_s"]
            print(f"HF {name}: {h['output_tok_per_s']:.0f} tok/s", flush=True)

    print("\n| point | ours tok/s | HF tok/s | x HF | TTFT p50 ms | ITL p50 ms | target met |")
    print("|---|---|---|---|---|---|---|")
    for name, r in result["points"].items():
        print(f"| {name} | {r['output_tok_per_s']:.0f} | {r.get('hf_output_tok_per_s', float('nan')):.0f} | "
              f"{r.get('speedup_vs_hf', float('nan')):.1f} | {r['ttft_ms_p50']:.2f} | {r['itl_ms_p50']:.3f} | {r['met']} |")
    print(f"copy bandwidth {bw:.2f} TB/s; weight-read floor {floor_ms:.3f} ms/step "
          f"({1e3 / floor_ms:.0f} tok/s at batch 1); load {result['load_s']:.1f}s + capture {result['graph_capture_s']:.1f}s")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{dt.date.today().isoformat()}-{torch.cuda.get_device_name().replace(' ', '-')}.json"
    path.write_text(json.dumps(result, indent=2, default=float) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
