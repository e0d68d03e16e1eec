"""Launch tiles of the q/k-norm + RoPE kernel (runtime/kernels/qk_norm_rope.py
`_qk_norm_rope_kernel`), measured on the device at the Qwen3-0.6B shape (16 q heads, 8 kv heads,
head_dim 128, fp16) for steps of 1 to 16,384 tokens. For each token count every tile of the grid is
checked against the torch reference and timed as the engine runs it: one call per layer (28), each
on its own input, writing K/V into a paged cache at scattered slots, captured in one CUDA graph and
replayed; the figure is the median replay per call. Prints, per token count, the current tile
(`qk_tile_for`), one token a program (the launch of every step before 2026-12-06) and the grid's
best, with the share of the measured copy bandwidth (bytes: qkv read, q / k / v written, k and v
stored in the cache), and writes the JSON. cuda only (the kernel's CPU check is
tests/runtime/test_fused_kernels.py, in Triton's interpreter).

    python benchmarks/kernels/qk_norm_rope_tune.py --out /tmp/qk.json
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from paged_decode_tune import copy_gbps, replay_us, report, us_share  # noqa: E402

from qualflow.runtime.kernels.destination import KvDestination  # noqa: E402
from qualflow.runtime.kernels.qk_norm_rope import QkTile, qk_tile_for, tri_qk_norm_rope  # noqa: E402
from qualflow.runtime.kernels.reference import ref_qk_norm_rope  # noqa: E402

LAYERS, H, KV, D, EPS, MAX_POS = 28, 16, 8, 128, 1e-6, 40960
TOKENS = (1, 64, 256, 1024, 8192, 16384)
GRID = [
    QkTile(1, 1),
    QkTile(2, 1),
    QkTile(4, 1),
    QkTile(4, 2),
    QkTile(8, 2),
    QkTile(8, 4),
    QkTile(16, 2),
    QkTile(16, 4),
    QkTile(16, 8),
    QkTile(32, 4),
    QkTile(32, 8),
    QkTile(64, 8),
]


def layer_inputs(n: int, gen: torch.Generator) -> tuple:
    qkv = torch.randn(n, (H + 2 * KV) * D, device="cuda", generator=gen).half()
    slots = torch.randperm(max(2 * n, 64), device="cuda", generator=gen)[:n]
    kc = torch.zeros(max(2 * n, 64), KV, D, device="cuda", dtype=torch.half)
    return qkv, KvDestination(kc, torch.zeros_like(kc), slots)


def measure(n: int, bw: float, gen: torch.Generator) -> dict:
    layers = [layer_inputs(n, gen) for _ in range(LAYERS)]
    wq, wk = (torch.rand(D, device="cuda", generator=gen).half() + 0.5 for _ in range(2))
    ang = torch.rand(MAX_POS, D // 2, device="cuda", generator=gen).repeat(1, 2)
    cos, sin = ang.cos(), ang.sin()
    pos = torch.randint(0, MAX_POS, (n,), device="cuda", generator=gen)
    qkv0, dest0 = layers[0]
    ref = ref_qk_norm_rope(
        qkv0,
        wq,
        wk,
        cos,
        sin,
        pos,
        H,
        KV,
        EPS,
        KvDestination(dest0.k_cache.clone(), dest0.v_cache.clone(), dest0.slots),
    )
    nbytes = (
        n * (H + 2 * KV) * D * 2 * 2 + n * 2 * KV * D * 2
    )  # qkv in, q/k/v out, k/v into the cache

    def timed(tile: QkTile) -> dict:
        got = tri_qk_norm_rope(qkv0, wq, wk, (cos, sin), pos, H, EPS, dest0, tile=tile)
        err = max(
            float((a.float() - b.float()).norm() / b.float().norm()) for a, b in zip(got, ref)
        )
        us = replay_us(
            lambda: [
                tri_qk_norm_rope(x, wq, wk, (cos, sin), pos, H, EPS, dst, tile=tile)
                for x, dst in layers
            ],
            LAYERS,
        )
        return {
            **asdict(tile),
            "us": round(us, 2),
            "rel_err": err,
            "share_of_copy": round(nbytes / us / 1e3 / bw, 3),
        }

    grid = []
    for tile in GRID:
        try:
            grid.append(timed(tile))
        except Exception as e:  # noqa: BLE001 - a tile Triton cannot compile is reported, not fatal
            grid.append({**asdict(tile), "error": f"{type(e).__name__}: {e}"[:160]})
    ok = [r for r in grid if "us" in r and r["rel_err"] < 5e-3]
    pick = lambda t: next((r for r in ok if QkTile(r["block_t"], r["num_warps"]) == t), None)  # noqa: E731
    layers.clear()  # the inputs freed before the cache is emptied
    torch.cuda.empty_cache()
    return {
        "tokens": n,
        "bytes": nbytes,
        "grid": grid,
        "best": min(ok, key=lambda r: r["us"]) if ok else None,
        "current": pick(qk_tile_for(n)),
        "per_token": pick(QkTile(1, 1)),
    }


def _line(r: dict) -> str:
    """One token count's printed line: one token a program, the current tile and the grid's best."""
    tile = f"block_t {r['best']['block_t']} warps {r['best']['num_warps']}" if r["best"] else ""
    return (
        f"{r['tokens']:>6} tokens  per token {us_share(r['per_token'], 8, 2)}  "
        f"current {us_share(r['current'], 8, 2)}  best {us_share(r['best'], 8, 2)} {tile}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument(
        "--tokens", default=",".join(map(str, TOKENS)), help="token counts, comma-separated"
    )
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print(
            "qk_norm_rope_tune: needs cuda (the CPU check is tests/runtime/test_fused_kernels.py)",
            file=sys.stderr,
        )
        return 2
    gen = torch.Generator(device="cuda").manual_seed(0)
    bw = copy_gbps()
    results = [measure(int(n), bw, gen) for n in a.tokens.split(",")]

    report(a.out, bw, results, _line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
