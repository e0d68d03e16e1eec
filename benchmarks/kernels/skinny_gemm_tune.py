"""Launch settings of the skinny GEMM (runtime/kernels/skinny_gemm.py) against cuBLAS, measured on
the device. For each projection of the Qwen3-0.6B decode step (qkv, o, gate_up, down, lm_head) and
each row count, every setting in the grid is checked against the torch reference and timed as the
decode step runs it: one call per layer, each on its own weight (nothing stays in L2), captured in
one CUDA graph and replayed; the figure is the median replay, per call. cuBLAS is timed the same
way. Prints, per shape and row count, cuBLAS, the current setting (`launch_for`) and the grid's
best, as a share of the measured copy bandwidth, and writes the JSON. (A form with the residual add
and RMSNorm in the GEMM's prologue was measured on 2026-12-03 and was no faster than the
add_rms_norm kernel before cuBLAS: results/NOTES.md.) cuda only (the kernel's CPU check is
tests/runtime/test_skinny_gemm.py, in Triton's interpreter).

    python benchmarks/kernels/skinny_gemm_tune.py --out /tmp/skinny.json
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from paged_decode_tune import copy_gbps, report, sweep, timer, us_share  # noqa: E402

from qualflow.runtime.kernels.skinny_gemm import Launch, launch_for, reference, skinny_gemm  # noqa: E402

LAYERS = 28
SHAPES = [
    ("qkv", 4096, 1024, LAYERS),
    ("o", 1024, 2048, LAYERS),
    ("gate_up", 6144, 1024, LAYERS),
    ("down", 1024, 3072, LAYERS),
    ("lm_head", 151936, 1024, 2),
]  # (name, N, K, calls per step)
ROWS = (1, 4, 16, 64)
# The region of the first run's best settings (2026-12-03: block_k 64 and 3 stages never won, 8
# warps never)
GRID = [Launch(bn, bk, w, 4) for bn, bk, w in itertools.product((16, 32, 64), (128, 256), (2, 4))]


def cublas(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.linear(x, w)


def measure(shape: tuple, rows: int, bw: float) -> dict:
    name, n, k, calls = shape
    ws = [torch.randn(n, k, device="cuda", dtype=torch.half) / k**0.5 for _ in range(calls)]
    xs = [torch.randn(rows, k, device="cuda", dtype=torch.half) for _ in range(calls)]
    ref = reference(xs[0], ws[0]).float()
    nbytes = n * k * 2
    timed = timer(list(zip(xs, ws)), ref, nbytes, bw)
    result = {
        "shape": name,
        "n": n,
        "k": k,
        "rows": rows,
        "weight_bytes": nbytes,
        "cublas": timed(cublas),
    }
    timed_at = lambda lc: timed(lambda x, w: skinny_gemm(x, w, lc))  # noqa: E731
    result.update(sweep(GRID, timed_at, launch_for(n, k)))
    ws.clear()  # the weights freed before the cache is emptied
    xs.clear()
    torch.cuda.empty_cache()
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--rows", default=",".join(map(str, ROWS)), help="row counts, comma-separated")
    ap.add_argument(
        "--only", default="", help="shapes to measure (e.g. qkv,o), comma-separated; default all"
    )
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print(
            "skinny_gemm_tune: needs cuda (the CPU check is tests/runtime/test_skinny_gemm.py)",
            file=sys.stderr,
        )
        return 2
    torch.manual_seed(0)
    bw = copy_gbps()
    rows = [int(r) for r in a.rows.split(",")]
    results = [
        measure(s, m, bw) for s in SHAPES for m in rows if not a.only or s[0] in a.only.split(",")
    ]

    def line(r: dict) -> str:
        b = r["best"]
        where = (
            f"bn {b['block_n']} bk {b['block_k']} w {b['num_warps']} s {b['num_stages']}"
            if b
            else ""
        )
        return (
            f"{r['shape']:>8} M{r['rows']:<3} cublas {us_share(r['cublas'])}  current "
            f"{us_share(r['current'])}  best {us_share(b)} {where}"
        )

    report(a.out, bw, results, line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
