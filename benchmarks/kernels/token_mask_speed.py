"""The constrained step's token mask on a GPU: the Triton kernel (kernels.token_mask) against its
torch reference, equal on every dtype, and the GPU time of each at the pilot's batch (64 rows, half
of them constrained, Qwen3's 151,936 tokens); `apply_bitmask` with a pinned mask must not wait for
the device. Prints one JSON object (--out also writes it).
    python3 benchmarks/kernels/token_mask_speed.py [--out FILE]"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from qualflow.bench.gpu_time import median_gpu_ms
from qualflow.runtime.engine.grammar import allocate_bitmask, apply_bitmask
from qualflow.runtime.kernels import token_mask

VOCAB, BATCH, ROWS = 151936, 64, 32


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    g = torch.Generator().manual_seed(0)
    words = allocate_bitmask(ROWS, VOCAB)
    words.copy_(torch.randint(-(2**31), 2**31, words.shape, generator=g, dtype=torch.int64))
    mask = words.cuda()
    rows = torch.randperm(BATCH, generator=g)[:ROWS].int().cuda()
    out = {"gpu": torch.cuda.get_device_name(), "batch": BATCH, "rows": ROWS, "vocab": VOCAB}
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        logits = torch.randn(BATCH, VOCAB, device="cuda", dtype=dt)
        want, got = logits.clone(), logits.clone()
        token_mask.reference(want, mask, rows)
        token_mask.apply(got, mask, rows)
        out[f"equal_{str(dt).split('.')[1]}"] = bool(torch.equal(want, got))
    logits = torch.randn(BATCH, VOCAB, device="cuda")
    out["reference_ms_p50"] = median_gpu_ms(
        lambda: token_mask.reference(logits, mask, rows), repeats=200, warmup=0
    )
    out["kernel_ms_p50"] = median_gpu_ms(
        lambda: token_mask.apply(logits, mask, rows), repeats=200, warmup=0
    )
    pinned = allocate_bitmask(ROWS, VOCAB, pinned=True)
    host_rows = rows.tolist()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        apply_bitmask(logits, pinned, host_rows)
        out["pinned_apply_waits"] = False
    except RuntimeError as e:
        out["pinned_apply_waits"] = str(e)[:200]
    finally:
        torch.cuda.set_sync_debug_mode(0)
    out["copy_and_apply_ms_p50"] = median_gpu_ms(
        lambda: apply_bitmask(logits, pinned, host_rows), repeats=200, warmup=0
    )
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
