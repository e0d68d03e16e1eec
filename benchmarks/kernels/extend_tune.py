"""Extend attention on a GPU (kernels.paged_extend): the Triton kernel, over a grid of its launch
settings and context splits, against what the engine ran before it (each layer gathers the context
out of the pool, then flash attention's varlen kernel; and flash alone, as a fresh step runs it), on
the pilot family's attention shape (16 query heads, 8 KV heads, head dim 128, fp16, 64-token
blocks). Every setting is checked against
flash attention's output first. GPU time per call, the median of 100 after a warm-up. Prints one
JSON object (--out also writes it).
    python3 benchmarks/kernels/extend_tune.py [--out FILE]"""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path

import torch

from qualflow.bench.gpu_time import median_gpu_ms
from qualflow.runtime.kernels import paged_extend

H, KV, D, BS = 16, 8, 128, 64
# (name, [(cached tokens, new tokens)] per sequence)
CASES = [
    ("last turn of a 6-turn session: 3,840 cached + 576 new", [(3840, 576)]),
    ("one new turn of 256 over 2,048 cached", [(2048, 256)]),
    ("agent replay: 8 sequences of 128 new over 1,536 cached", [(1536, 128)] * 8),
    ("a later chunk: 2,048 new over 4,096", [(4096, 2048)]),
    ("fresh: one prompt of 1,024 (c1 ISL 1024's prefill)", [(0, 1024)]),
    ("fresh: 8 prompts of 1,024 (the pilot's prefill step)", [(0, 1024)] * 8),
]
LAUNCHES = [
    paged_extend.Launch(64, 64, 4, 2),
    paged_extend.Launch(64, 64, 4, 3),
    paged_extend.Launch(64, 32, 4, 2),
    paged_extend.Launch(128, 64, 8, 2),
    paged_extend.Launch(128, 64, 8, 3),
    paged_extend.Launch(128, 32, 4, 2),
]


def _step(seqs, g):
    """A pool with each sequence's blocks scattered, the step's queries, its tables and the
    gathered context's slots."""
    nb = [-(-(c + n) // BS) for c, n in seqs]
    blocks = sum(nb) + 64
    kc = torch.randn(blocks, BS, KV, D, device="cuda", dtype=torch.float16, generator=g)
    vc = torch.randn(blocks, BS, KV, D, device="cuda", dtype=torch.float16, generator=g)
    order = torch.randperm(blocks, device="cuda", generator=g)
    tables = torch.zeros(len(seqs), max(nb), dtype=torch.long, device="cuda")
    o = 0
    for i, n in enumerate(nb):
        tables[i, :n] = order[o : o + n]
        o += n
    q = torch.randn(sum(n for _, n in seqs), H, D, device="cuda", dtype=torch.float16, generator=g)
    slots = torch.cat(
        [
            (tables[i, : nb[i], None] * BS + torch.arange(BS, device="cuda")).flatten()[: c + n]
            for i, (c, n) in enumerate(seqs)
        ]
    )
    return kc, vc, tables, q, slots


def _case(name, seqs, sms, g) -> dict:
    kc, vc, tables, q, slots = _step(seqs, g)
    q_lens, k_lens = [n for _, n in seqs], [c + n for c, n in seqs]
    cu_q, cu_k = (
        torch.tensor([0, *torch.tensor(ls).cumsum(0).tolist()], dtype=torch.int32).cuda()
        for ls in (q_lens, k_lens)
    )
    kf, vf = kc.view(-1, KV, D), vc.view(-1, KV, D)

    def gathered():
        return torch.ops.aten._flash_attention_forward(
            q, kf[slots], vf[slots], cu_q, cu_k, max(q_lens), max(k_lens), 0.0, True, False
        )[0]

    K, V = kf[slots], vf[slots]

    def direct():  # a fresh step's: flash on the step's own K/V, nothing gathered
        return torch.ops.aten._flash_attention_forward(
            q, K, V, cu_q, cu_k, max(q_lens), max(k_lens), 0.0, True, False
        )[0]

    ref = gathered().float()
    ctx = torch.tensor(k_lens, dtype=torch.long, device="cuda")
    row = {
        "case": name,
        "gather_flash_ms": median_gpu_ms(gathered),
        "flash_ms": median_gpu_ms(direct),
    }
    row["settings"] = []
    flops = sum(4 * n * (c + n / 2) * H * D for c, n in seqs)
    for launch in LAUNCHES:
        tiles = torch.from_numpy(
            paged_extend.tiles_for(q_lens, [c for c, _ in seqs], launch.block_m)
        ).cuda()
        auto = paged_extend.splits_for(len(tiles), H, sms)
        for splits in sorted({1, 2, 4, 8, auto}):
            run = functools.partial(
                paged_extend.paged_extend, q, kc, vc, tiles, tables, ctx, splits, launch
            )
            err = float((run().float() - ref).norm() / ref.norm())
            ms = median_gpu_ms(run) if err < 1e-2 else None
            row["settings"].append(
                {
                    "launch": launch.__dict__,
                    "splits": splits,
                    "auto": splits == auto,
                    "rel_err": err,
                    "ms": ms,
                    "tflops": ms and flops / ms / 1e9,
                }
            )
    best = min((s for s in row["settings"] if s["ms"]), key=lambda s: s["ms"], default=None)
    row["best"] = best
    default = [
        s for s in row["settings"] if s["auto"] and s["launch"] == paged_extend.Launch().__dict__
    ]
    row["default_ms"] = default[0]["ms"] if default else None
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = {"gpu": torch.cuda.get_device_name(), "sms": sms, "cases": []}
    for name, seqs in CASES:
        out["cases"].append(_case(name, seqs, sms, g))
        c = out["cases"][-1]
        print(
            f"{name}: gather+flash {c['gather_flash_ms']:.3f} ms, flash {c['flash_ms']:.3f}, "
            f"default {c['default_ms']}, "
            f"best {c['best'] and (c['best']['ms'], c['best']['launch'], c['best']['splits'])}",
            flush=True,
        )
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
