"""Attention of one fresh prompt (a c1 request's prefill step) on a GPU, by kernel, on the pilot
family's attention shape (16 query heads, 8 KV heads, head dim 128, fp16, causal): flash
attention's varlen kernel as the engine runs it, and torch's dense SDPA through each backend that
runs here (flash, cuDNN, memory-efficient), grouped K/V as they are or repeated. Each is checked
against the float32 reference, timed (GPU time per call, the median of 100 after a warm-up) and
captured in a CUDA graph and replayed (does it capture, and does the replay agree). Prints one
JSON object (--out also writes it).
    python3 benchmarks/kernels/prefill_attention_speed.py [--out FILE]"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from qualflow.bench.gpu_time import median_gpu_ms

H, KV, D = 16, 8, 128
LENGTHS = (128, 512, 1024, 2048)
BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
}


def _varlen(q, k, v):
    n = q.shape[0]
    cu = torch.tensor([0, n], dtype=torch.int32, device=q.device)
    return torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, n, n, 0.0, True, False)[0]


def _dense(backend, repeat: bool):
    def run(q, k, v):  # [N, H, D] packed, as the engine holds them
        if repeat:
            k, v = (t.repeat_interleave(H // KV, dim=1) for t in (k, v))
        qt, kt, vt = (t.transpose(0, 1).unsqueeze(0) for t in (q, k, v))
        with sdpa_kernel([backend]):
            o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, enable_gqa=not repeat)
        return o[0].transpose(0, 1)

    return run


def _graph(fn, args):
    """Capture `fn(*args)` in a CUDA graph and replay it: (its output, None) or (None, why)."""
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn(*args)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = fn(*args)
        g.replay()
        torch.cuda.synchronize()
        return out, None
    except Exception as e:  # noqa: BLE001 - a kernel that cannot be captured is a finding
        torch.cuda.synchronize()
        return None, f"{type(e).__name__}: {str(e)[:200]}"


def _rel(out, ref) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def measure(n: int) -> dict:
    g = torch.Generator(device="cuda").manual_seed(n)
    q = torch.randn(n, H, D, device="cuda", dtype=torch.float16, generator=g)
    k, v = (torch.randn(n, KV, D, device="cuda", dtype=torch.float16, generator=g) for _ in "kv")
    ref = _dense(SDPBackend.MATH, True)(q.float(), k.float(), v.float())
    flops = 4 * n * n * D * H / 2  # causal
    kernels = {"flash_varlen": _varlen}
    for name, b in BACKENDS.items():
        kernels[f"sdpa_{name}"] = _dense(b, False)
        kernels[f"sdpa_{name}_repeat_kv"] = _dense(b, True)
    rows = {}
    for name, fn in kernels.items():
        try:
            err = _rel(fn(q, k, v), ref)
            ms = median_gpu_ms(lambda fn=fn: fn(q, k, v))
        except Exception as e:  # noqa: BLE001 - not on this build or GPU
            rows[name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
            continue
        out, why = _graph(fn, (q, k, v))
        rows[name] = {"rel_err": err, "ms": ms, "tflops": flops / ms / 1e9}
        rows[name] |= {"graph_rel_err": _rel(out, ref)} if why is None else {"graph_error": why}
    return {"tokens": n, "kernels": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out")
    a = ap.parse_args()
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    res["cudnn"] = torch.backends.cudnn.version()
    res["cases"] = [measure(n) for n in LENGTHS]
    for c in res["cases"]:
        for name, r in c["kernels"].items():
            fig = f"{r['ms'] * 1e3:7.1f} us {r['tflops']:5.0f} TFLOP/s" if "ms" in r else r["error"]
            graph = "graph ok" if "graph_rel_err" in r else r.get("graph_error", "")
            print(f"{c['tokens']:5d} {name:24s} {fig}  {graph[:80]}", flush=True)
    text = json.dumps(res, indent=1)
    print(text if not a.out else f"wrote {a.out}")
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
