"""Where a decode step's GPU time goes: torch.profiler over the compiled (not graph-captured)
forward at batch 1 and 64, top kernels by CUDA time. Uses the bundle `qualflow bench engine` built
under --work.

`--prefill 8x1024,16x1024` also profiles fresh prefill steps as the engine runs them
(ModelRunner.run: S prompts of T tokens in one step, K/V written to the cache, the last token's
logits), each with its wall time per step on the device clock next to the kernels' sum: the pilot
shape's prefill at the default token budget (8 x 1024) and at twice it."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import torch
from torch.profiler import ProfilerActivity, profile

from qualflow.artifacts.bundle import build_bundle
from qualflow.artifacts.pin import pin_checkpoint, write_pin
from qualflow.bench.roofline import _timed
from qualflow.families.qwen3.synthetic import write_embedded
from qualflow.runtime import EngineConfig, load_task
from qualflow.runtime.engine.scheduler import Batch


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/qualflow-gpu")
    ap.add_argument("--rows", type=int, default=18)
    ap.add_argument(
        "--prefill",
        default="",
        help="comma-separated SxT fresh prefill steps to profile (8x1024,16x1024)",
    )
    ap.add_argument("--skip-decode", action="store_true", help="only the --prefill steps")
    a = ap.parse_args()
    work = Path(a.work)
    if not (work / "bundle" / "manifest.json").exists():
        ckpt = write_embedded(work / "ckpt", "qwen3-0.6b")
        build_bundle(
            write_pin(pin_checkpoint(str(ckpt)), work / "pin.json"),
            "fp16",
            work / "bundle",
            force=True,
        )
    task = load_task(
        work / "bundle",
        EngineConfig(device="cuda", max_batch=64, max_context=1100, engine_process="off"),
    )  # its runner is read here
    print(f"load {task.load_timing}")
    graphs, runner = task.engine.runner.graphs, task.engine.runner
    for spec in filter(None, a.prefill.split(",")):
        S, T = (int(v) for v in spec.lower().split("x"))
        _profile_prefill(runner, S, T, a.rows)
    for bs, T in (
        () if a.skip_decode else ((1, 1), (64, 1), (1, 1024))
    ):  # decode at batch 1 and 64 (context 256); a 1024-token prefill
        if T == 1:  # the captured step's code, run uncaptured over the static buffers
            graphs.tables[:bs, :4] = torch.arange(
                1, 1 + 4 * bs, device="cuda", dtype=torch.int32
            ).view(bs, 4)
            graphs.lens[:bs] = 256

            def step(bs=bs):
                graphs._run(bs)

        else:

            def step(T=T):
                runner.score([1] * T)

        _profiled(step, f"batch {bs} x {T} tokens", a.rows)
    task.close()
    return 0


def _profiled(step, title: str, rows: int, wall: bool = False) -> None:
    """Warm `step` up, profile 5 calls and print its kernels by CUDA time (with `wall`: first the
    wall ms per call on the device clock, roofline._timed)."""
    with torch.inference_mode():
        took = f"{_timed(torch.device('cuda'), step, 5) * 1e3:.3f} ms/step wall, " if wall else ""
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                step()
            torch.cuda.synchronize()
    ev = prof.key_averages()
    total = sum(e.self_device_time_total for e in ev)
    n = sum(e.count for e in ev if e.self_device_time_total > 0)
    print(
        f"\n=== {title}: {took}kernels {total / 5 / 1e3:.3f} ms/step, "
        f"{n / 5:.0f} kernels/step (5 steps) ==="
    )
    print(ev.table(sort_by="self_device_time_total", row_limit=rows, max_name_column_width=70))


def _profile_prefill(runner, seqs: int, tokens: int, rows: int) -> None:
    """One fresh prefill step of `seqs` prompts of `tokens` tokens, as the engine runs it."""
    per = -(-tokens // runner.block_size)
    batch = Batch(
        [
            SimpleNamespace(
                token_ids=[(7 * i + j) % 1000 + 1 for j in range(tokens)],
                pending=None,
                block_table=list(range(1 + i * per, 1 + (i + 1) * per)),
            )
            for i in range(seqs)
        ],
        [0] * seqs,
        [tokens] * seqs,
        [True] * seqs,
    )
    _profiled(lambda: runner.run(batch), f"prefill {seqs} x {tokens} tokens", rows, wall=True)


if __name__ == "__main__":
    raise SystemExit(main())
