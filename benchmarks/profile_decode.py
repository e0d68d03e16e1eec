"""Where a decode step's GPU time goes: torch.profiler over the compiled (not graph-captured) forward
at batch 1 and 64, top kernels by CUDA time. Uses the bundle gpu_speed.py built under --work."""
from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from qualflow.artifacts.bundle import build_bundle
from qualflow.artifacts.pin import pin_checkpoint, write_pin
from qualflow.families.qwen3.synthetic import write_embedded
from qualflow.runtime import EngineConfig, load_task


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/qualflow-gpu")
    ap.add_argument("--rows", type=int, default=18)
    a = ap.parse_args()
    work = Path(a.work)
    if not (work / "bundle" / "manifest.json").exists():
        ckpt = write_embedded(work / "ckpt", "qwen3-0.6b")
        build_bundle(write_pin(pin_checkpoint(str(ckpt)), work / "pin.json"), "fp16", work / "bundle", force=True)
    task = load_task(work / "bundle", EngineConfig(device="cuda", max_batch=64, max_context=1100))
    print(f"load {task.load_timing}")
    graphs, runner = task.engine.runner.graphs, task.engine.runner
    for bs, T in ((1, 1), (64, 1), (1, 1024)):  # decode at batch 1 and 64 (context 256); a 1024-token prefill
        if T == 1:  # the captured step's code, run uncaptured over the static buffers
            graphs.tables[:bs, :4] = torch.arange(1, 1 + 4 * bs, device="cuda", dtype=torch.int32).view(bs, 4)
            graphs.lens[:bs] = 256
            step = lambda: graphs._run(bs)  # noqa: E731
        else:
            step = lambda: runner.score([1] * T)  # noqa: E731
        with torch.inference_mode():
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    step()
                torch.cuda.synchronize()
        print(f"\n=== batch {bs} x {T} tokens: kernels by CUDA time (5 steps) ===")
        ev = prof.key_averages()
        total = sum(e.self_device_time_total for e in ev)
        n = sum(e.count for e in ev if e.self_device_time_total > 0)
        print(f"total CUDA {total / 5 / 1e3:.3f} ms/step, {n / 5:.0f} kernels/step")
        print(ev.table(sort_by="self_device_time_total", row_limit=a.rows, max_name_column_width=70))
    task.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
