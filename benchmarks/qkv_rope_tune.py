"""The fused qkv projection + q/k-norm + RoPE + K/V store (runtime/kernels/qkv_rope.py) against the pair
it replaces (the skinny GEMM, then fused.qk_norm_rope), measured on the device at the Qwen3-0.6B decode
shapes: one call per layer, each on its own weight, captured in one CUDA graph and replayed, every
kernel launched with programmatic dependent launch as the decode graphs launch them; the figure is the
median replay per layer. Each launch setting in the grid is checked against the reference first.
Prints, per row count, the pair, the current setting and the grid's best, and writes the JSON. cuda
only (the CPU check is tests/runtime/test_qkv_rope.py, in Triton's interpreter).

    python benchmarks/qkv_rope_tune.py --out /tmp/qkv.json
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import asdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from paged_decode_tune import replay_us  # noqa: E402

from qualflow.runtime.kernels import fused, qkv_rope, skinny_gemm  # noqa: E402
from qualflow.runtime.kernels.destination import KvDestination  # noqa: E402

HEADS, KV, D, HIDDEN, LAYERS, EPS = 16, 8, 128, 1024, 28, 1e-6
ROWS = (1, 4, 16)
GRID = [qkv_rope.Launch(bk, w, s) for bk, w, s in itertools.product((64, 128, 256), (2, 4, 8), (2, 3, 4))]


def layers(rows: int):
    dev = {"device": "cuda", "dtype": torch.half}
    ang = torch.rand(4096, D, device="cuda") * 6.28
    rope = (ang.cos(), ang.sin())
    pos = torch.randint(0, 4096, (rows,), device="cuda")
    out = []
    for _ in range(LAYERS):
        kc = torch.zeros(4 * rows, KV, D, **dev)
        dest = KvDestination(kc, torch.zeros_like(kc), torch.randperm(4 * rows, device="cuda")[:rows])
        w = torch.randn((HEADS + 2 * KV) * D, HIDDEN, **dev) / HIDDEN ** 0.5
        out.append((torch.randn(rows, HIDDEN, **dev), w, torch.randn(D, **dev), torch.randn(D, **dev), rope, pos, dest))
    return out


def pair(x, w, wq, wk, rope, pos, dest):
    qkv = skinny_gemm.skinny_gemm(x, w, pdl=True)
    return fused.tri_qk_norm_rope(qkv, wq, wk, rope, pos, HEADS, KV, EPS, dest, pdl=True)


def fused_one(x, w, wq, wk, rope, pos, dest):
    return qkv_rope.qkv_rope(x, w, wq, wk, rope, pos, HEADS, EPS, dest, pdl=True)


def measure(rows: int) -> dict:
    ls = layers(rows)
    ref = [t.float() for t in qkv_rope.reference(*ls[0][:6], HEADS, EPS)]
    err = lambda got: max(float((g.float() - r).norm() / r.norm()) for g, r in zip(got, ref))  # noqa: E731
    timed = lambda fn: round(replay_us(lambda: [fn(*a) for a in ls], LAYERS), 2)  # noqa: E731
    res = {"rows": rows, "pair": {"us": timed(pair), "rel_err": err(pair(*ls[0]))}, "grid": []}
    current = qkv_rope.LAUNCH
    for lc in GRID:
        qkv_rope.LAUNCH = lc
        try:
            res["grid"].append({**asdict(lc), "rel_err": err(fused_one(*ls[0])), "us": timed(fused_one)})
        except Exception as e:  # noqa: BLE001 - a setting Triton cannot compile (shared memory) is reported
            res["grid"].append({**asdict(lc), "error": f"{type(e).__name__}: {e}"[:160]})
    qkv_rope.LAUNCH = current
    ok = [r for r in res["grid"] if "us" in r and r["rel_err"] < 5e-3]
    res["best"] = min(ok, key=lambda r: r["us"]) if ok else None
    res["current"] = next((r for r in ok if qkv_rope.Launch(r["block_k"], r["num_warps"], r["num_stages"]) == current),
                          None)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("qkv_rope_tune: needs cuda (the CPU check is tests/runtime/test_qkv_rope.py)", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    res = {"device": torch.cuda.get_device_name(), "results": [measure(m) for m in ROWS]}
    Path(a.out).write_text(json.dumps(res, indent=1))
    us = lambda r: f"{r['us']:6.2f} us" if r else "  failed"  # noqa: E731
    for r in res["results"]:
        b = r["best"]
        where = f"bk {b['block_k']} w {b['num_warps']} s {b['num_stages']}" if b else ""
        print(f"M{r['rows']:<3} GEMM + qk_norm_rope {us(r['pair'])}  fused: current {us(r['current'])}  "
              f"best {us(b)} {where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
