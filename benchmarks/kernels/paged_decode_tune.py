"""Launch settings of the paged decode attention kernel (runtime/kernels/paged_decode.py), measured
on the device. For each decode shape of the Qwen3-0.6B engine (16 query heads, 8 KV heads, head dim
128, 64-token blocks), every setting in the grid (warps, pipeline stages, context splits) is checked
against the plain-torch reference and timed as the engine runs it: one call per layer, each on its
own cache, all captured in one CUDA graph (the decode step's way) and replayed; the figure is the
median replay, per call. Prints each shape's current setting beside the fastest, as a share of the
measured copy bandwidth, and writes the JSON. cuda only (the kernel's CPU check is
tests/runtime/test_engine_kernel.py, in Triton's interpreter).

    python benchmarks/kernels/paged_decode_tune.py --out /tmp/tune.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from dataclasses import asdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from qualflow.runtime.kernels.paged_decode import (
    Launch,
    launch_for,
    paged_decode,
    reference,
    splits_for,
)  # noqa: E402

HEADS, KV_HEADS, HEAD_DIM, BLOCK = 16, 8, 128, 64
SHAPES = [
    ("b1_ctx384", 1, 384),
    ("b64_ctx256", 64, 256),
    ("b64_ctx1152", 64, 1152),
    ("b256_ctx256", 256, 256),
]
WARPS, STAGES = (2, 4, 8), (2, 3)
LAYERS = 28  # one call per layer in a decode step, each on its own cache (nothing stays in L2)


def inputs(batch: int, ctx: int, gen: torch.Generator):
    """A pool with the batch's blocks scattered over it (block 0 reserved), as the engine lays it
    out."""
    per = -(-ctx // BLOCK)
    blocks = batch * per + 1
    dev = {"device": "cuda", "dtype": torch.half}
    kc = torch.randn(blocks, BLOCK, KV_HEADS, HEAD_DIM, **dev)
    vc = torch.randn(blocks, BLOCK, KV_HEADS, HEAD_DIM, **dev)
    q = torch.randn(batch, HEADS, HEAD_DIM, **dev)
    bt = (torch.randperm(blocks - 1, generator=gen) + 1).view(batch, per).to(torch.int32).cuda()
    lens = torch.full((batch,), ctx, dtype=torch.int32).cuda()
    return q, kc, vc, bt, lens


def copy_gbps() -> float:
    x = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    return 2 * x.numel() / replay_us(lambda: y.copy_(x), 1) / 1e3


def report(out: str, bw: float, results: list[dict], line) -> None:
    """A kernel tune's ending: its JSON (device, copy bandwidth, `results`) written to `out`,
    then one printed `line(result)` per result under the bandwidth."""
    Path(out).write_text(
        json.dumps(
            {"device": torch.cuda.get_device_name(), "copy_gbps": round(bw, 1), "results": results},
            indent=1,
        )
    )
    print(f"copy bandwidth {bw:.0f} GB/s; us per call (share of copy bandwidth)")
    for r in results:
        print(line(r))


def us_share(r: dict | None, width: int = 7, digits: int = 1) -> str:
    """A timed setting as 'us (share of copy bandwidth)', or 'failed' (None: no setting agreed)."""
    return (
        f"{r['us']:{width}.{digits}f} ({r['share_of_copy']:4.0%})"
        if r
        else f"{'failed':>{width + 7}}"
    )


def replay_us(fn, calls: int, replays: int = 20) -> float:
    """Median microseconds per call of `fn` (which makes `calls` kernel calls), captured in a
    graph."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)


def timer(calls: list[tuple], ref: torch.Tensor, nbytes: int, bw: float):
    """The projection tunes' `timed(fn)`: fn(*args) for every args of `calls` (one per layer,
    each on its own weight), captured in one graph and replayed, per call (us), with its relative
    error against `ref` on the first call and its share of the copy bandwidth `bw` for a weight of
    `nbytes`."""

    def timed(fn) -> dict:
        err = float((fn(*calls[0]).float() - ref).norm() / ref.norm())
        us = replay_us(lambda: [fn(*args) for args in calls], len(calls))
        return {
            "us": round(us, 2),
            "rel_err": err,
            "share_of_copy": round(nbytes / us / 1e3 / bw, 3),
        }

    return timed


def sweep(grid: list, timed_at, current, max_err: float = 5e-3) -> dict:
    """Every launch setting of `grid` timed by `timed_at(setting)` (a setting Triton cannot compile
    is reported with its error): the grid's rows, the fastest within `max_err` of the reference
    ("best") and the `current` setting's row (None where it failed)."""
    rows = []
    for lc in grid:
        try:
            rows.append({**asdict(lc), **timed_at(lc)})
        except Exception as e:  # noqa: BLE001 - a setting Triton cannot compile is reported
            rows.append({**asdict(lc), "error": f"{type(e).__name__}: {e}"[:160]})
    ok = [r for r in rows if "us" in r and r["rel_err"] < max_err]
    cur = asdict(current)
    return {
        "grid": rows,
        "best": min(ok, key=lambda r: r["us"]) if ok else None,
        "current": next((r for r in ok if all(r[k] == v for k, v in cur.items())), None),
    }


def measure(shape: tuple[str, int, int], bw: float, gen: torch.Generator) -> dict:
    name, batch, ctx = shape
    layers = [inputs(batch, ctx, gen) for _ in range(LAYERS)]
    q, kc, vc, bt, lens = layers[0]
    ref = reference(q, kc, vc, bt, lens).float()
    nbytes = 2 * batch * ctx * KV_HEADS * HEAD_DIM * 2
    base = splits_for(batch, KV_HEADS)
    counters = torch.zeros(
        batch * KV_HEADS, dtype=torch.int32, device="cuda"
    )  # the engine's one kernel per call
    rows = []
    for splits, warps, stages in itertools.product(
        sorted({base // 2 or 1, base, 2 * base}), WARPS, STAGES
    ):
        launch = Launch(num_warps=warps, num_stages=stages)

        def step(splits=splits, launch=launch):
            for args in layers:
                paged_decode(*args, splits, launch, counters=counters)

        try:
            out = paged_decode(q, kc, vc, bt, lens, splits, launch, counters=counters).float()
            err = float((out - ref).norm() / ref.norm())
            us = replay_us(step, LAYERS)
        except Exception as e:  # noqa: BLE001 - a setting Triton cannot compile (shared memory) is reported
            rows.append(
                {"splits": splits, **asdict(launch), "error": f"{type(e).__name__}: {e}"[:200]}
            )
            continue
        rows.append(
            {
                "splits": splits,
                **asdict(launch),
                "us": round(us, 2),
                "rel_err": err,
                "gbps": round(nbytes / us / 1e3, 1),
                "share_of_copy": round(nbytes / us / 1e3 / bw, 3),
            }
        )
    ok = [r for r in rows if "us" in r and r["rel_err"] < 2e-3]
    current = next(
        (
            r
            for r in ok
            if r["splits"] == base and Launch(r["num_warps"], r["num_stages"]) == launch_for(base)
        ),
        None,
    )
    best = min(ok, key=lambda r: r["us"]) if ok else None
    return {
        "shape": name,
        "batch": batch,
        "ctx": ctx,
        "kv_bytes": nbytes,
        "current": current,
        "best": best,
        "rows": rows,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print(
            "paged_decode_tune: needs cuda (the kernel's CPU check is "
            "tests/runtime/test_engine_kernel.py)",
            file=sys.stderr,
        )
        return 2
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    bw = copy_gbps()
    result = {
        "device": torch.cuda.get_device_name(),
        "copy_gbps": round(bw, 1),
        "default": {"one split": asdict(launch_for(1)), "several": asdict(launch_for(2))},
        "shapes": [measure(s, bw, gen) for s in SHAPES],
    }
    Path(a.out).write_text(json.dumps(result, indent=1))
    print(f"copy bandwidth {bw:.0f} GB/s")
    for s in result["shapes"]:
        c, b = s["current"], s["best"]
        cur = f"{c['us']:.1f} us ({c['share_of_copy']:.0%})" if c else "failed"
        best = (
            (
                f"{b['us']:.1f} us ({b['share_of_copy']:.0%}) splits {b['splits']} warps "
                f"{b['num_warps']} stages {b['num_stages']}"
            )
            if b
            else "none"
        )
        print(f"{s['shape']:<12} current {cur:<20} best {best}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
