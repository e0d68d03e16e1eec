"""Launch settings of the one-row GEMV (runtime/kernels/gemv.py) against the skinny GEMM at one row
(its current settings) and cuBLAS, measured on the device. For each projection of the Qwen3-0.6B
decode step (qkv, o, gate_up with SiLU-mul, down, lm_head), every setting in the grid is checked
against the torch reference and timed as the decode step runs it: one call per layer, each on its
own weight (nothing stays in L2), launched with programmatic dependent launch where the device
has it, captured in one CUDA graph and replayed; the figure is the median replay, per call.
The grid includes settings that load two weight chunks before the wait (`GemvLaunch.prefetch`).
Prints, per shape, cuBLAS, the skinny GEMM, the GEMV's current setting (`gemv.launch_for`) and the
grid's best, as a share of the measured copy bandwidth, and writes the JSON. For qkv and gate_up
(the projections after an RMSNorm) it also times, at the current settings, the add_rms_norm
kernel then the GEMV (the step without --norm-gemv) against the GEMV with the RMSNorm inside
(kernels.norm_gemv), per call. cuda only (the kernels' CPU checks are tests/runtime/test_gemv.py
and test_norm_gemv.py, in Triton's interpreter).

    python benchmarks/kernels/gemv_tune.py --out /tmp/gemv.json
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

from qualflow.runtime.kernels import gemv, norm_gemv, pdl, skinny_gemm  # noqa: E402
from qualflow.runtime.kernels.elementwise import tri_add_rms_norm  # noqa: E402

LAYERS = 28
SHAPES = [
    ("qkv", 4096, 1024, LAYERS, False),
    ("o", 1024, 2048, LAYERS, False),
    ("gate_up", 3072, 1024, LAYERS, True),  # N: the output's columns (the weight has 2N rows)
    ("down", 1024, 3072, LAYERS, False),
    ("lm_head", 151936, 1024, 2, False),
]  # (name, N, K, calls per step, SwiGLU form)
GRID = [
    gemv.GemvLaunch(bn, bk, w, 3)
    for bn, bk, w in itertools.product((4, 8, 16, 32), (256, 512), (2, 4))
]
# two weight chunks loaded before the wait, in the region of the first tune's best settings
GRID += [
    gemv.GemvLaunch(bn, bk, 2, 3, prefetch=2) for bn, bk in itertools.product((4, 8), (256, 512))
]
WIDE = [
    gemv.GemvLaunch(bn, bk, w, 3) for bn, bk, w in itertools.product((32, 64, 128), (256,), (4, 8))
]


def measure(shape: tuple, bw: float, use_pdl: bool) -> dict:
    name, n, k, calls, glu = shape
    rows_w = 2 * n if glu else n
    ws = [torch.randn(rows_w, k, device="cuda", dtype=torch.half) / k**0.5 for _ in range(calls)]
    xs = [torch.randn(1, k, device="cuda", dtype=torch.half) for _ in range(calls)]
    refs = skinny_gemm.reference_gate_up_silu if glu else skinny_gemm.reference
    ref = refs(xs[0].float(), ws[0].float())
    nbytes = rows_w * k * 2
    timed = timer(list(zip(xs, ws)), ref, nbytes, bw)
    form = gemv.gemv_gate_up_silu if glu else gemv.gemv
    skinny = skinny_gemm.skinny_gate_up_silu if glu else skinny_gemm.skinny_gemm
    result = {
        "shape": name,
        "n": n,
        "k": k,
        "weight_bytes": nbytes,
        "pdl": use_pdl,
        "skinny": timed(lambda x, w: skinny(x, w, pdl=use_pdl)),
    }
    if not glu:
        result["cublas"] = timed(torch.nn.functional.linear)
    grid = WIDE if n > 65536 else GRID
    timed_at = lambda lc: timed(lambda x, w: form(x, w, lc, pdl=use_pdl))  # noqa: E731
    result.update(sweep(grid, timed_at, gemv.launch_for(rows_w, k)))
    if name in ("qkv", "gate_up"):
        result["norm_forms"] = norm_forms(xs, ws, glu, use_pdl, nbytes, bw)
    ws.clear()
    xs.clear()
    torch.cuda.empty_cache()
    return result


def norm_forms(xs, ws, glu: bool, use_pdl: bool, nbytes: int, bw: float) -> dict:
    """The add_rms_norm kernel then the GEMV ("unfused") against the GEMV with the RMSNorm inside
    ("norm"), per call at the current settings, each on its own weight, residual and input; each
    checked on the first call against the unfused step's reference. A form that fails is
    reported."""
    ds = [torch.randn_like(x) for x in xs]
    w_norm = torch.randn(xs[0].shape[1], device="cuda", dtype=torch.half) * 0.1 + 1
    form = gemv.gemv_gate_up_silu if glu else gemv.gemv
    inside = norm_gemv.add_norm_gemv_gate_up_silu if glu else norm_gemv.add_norm_gemv

    def unfused(x, d, w):
        h, y = tri_add_rms_norm(x, d, w_norm, 1e-6, pdl=use_pdl)
        return h, form(y, w, pdl=use_pdl)

    def normed(x, d, w):
        return inside(x, d, w_norm, 1e-6, w, pdl=use_pdl)

    ref = norm_gemv.reference_norm(xs[0], ds[0], w_norm, 1e-6, ws[0], glu)[1]
    timed = timer(list(zip(xs, ds, ws)), ref, nbytes, bw)
    out = {}
    for key, fn in (("unfused", unfused), ("norm", normed)):
        try:
            out[key] = timed(lambda x, d, w, fn=fn: fn(x, d, w)[1])
        except Exception as e:  # noqa: BLE001 - reported, the grid's figures still written
            out[key] = {"error": f"{type(e).__name__}: {e}"[:160]}
    return out


def _launch(r: dict) -> dict:
    return {key: r[key] for key in ("block_n", "block_k", "num_warps", "num_stages", "prefetch")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--only", default="", help="shapes to measure (e.g. qkv,o); default all")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print(
            "gemv_tune: needs cuda (the CPU check is tests/runtime/test_gemv.py)", file=sys.stderr
        )
        return 2
    torch.manual_seed(0)
    bw = copy_gbps()
    use_pdl = pdl.supported(torch.device("cuda")) is None
    only = a.only.split(",") if a.only else [s[0] for s in SHAPES]
    results = [measure(s, bw, use_pdl) for s in SHAPES if s[0] in only]

    def line(r: dict) -> str:
        b = r["best"]
        where = " ".join(f"{k} {v}" for k, v in _launch(b).items()) if b else ""
        forms = {k: v if "us" in v else None for k, v in r.get("norm_forms", {}).items()}
        norm = (
            f"  add_rms_norm + gemv {us_share(forms['unfused'])}  inside {us_share(forms['norm'])}"
            if forms
            else ""
        )
        return (
            f"{r['shape']:>8} cublas {us_share(r.get('cublas'))}  skinny {us_share(r['skinny'])}"
            f"  gemv current {us_share(r['current'])}  best {us_share(b)} {where}{norm}"
        )

    report(a.out, bw, results, line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
