"""The physical limit of a serving point, from the model's shape and the GPU's bandwidth and FLOP/s:
the one roofline the engine benchmark (measured device figures) and the evidence (the GPU's
datasheet peaks, `gpu_peaks`) both use.

A point is `concurrency` requests in flight, each a prompt of `isl` tokens and `osl` output tokens.
  - decode: every step reads all the weights once plus the K/V of every running sequence at its
    context, so step j (context isl + j for each of the c sequences) takes at least
    (weight bytes + c * (isl + j) * KV bytes per token) / bandwidth;
  - prefill: 2 * params FLOPs per prompt token at the matmul peak.
The limit is c * osl output tokens over the sum of both.

The offline workload (requests of different lengths, all submitted at once) is bounded the same
way (`workload_roofline`): at least as many decode steps as its longest output, each reading all the
weights, every output token reading its sequence's K/V at its context, and the prefill FLOPs.

A shape is {"params", "weight_bytes", "kv_bytes_per_token"}; a device {"copy_bandwidth_tb_s",
"matmul_tflops"}."""

from __future__ import annotations

import re

# Datasheet peaks of the GPUs the project knows: HBM bandwidth (TB/s) and dense FP16/BF16 tensor
# FLOP/s (no sparsity), by a pattern of the name CUDA reports, most specific first.
GPU_PEAKS: tuple[tuple[str, float, float], ...] = (
    (r"H200 NVL", 4.8, 835.0),
    (r"H200", 4.8, 989.4),
    (r"H100 NVL", 3.9, 835.0),
    (r"H100 PCIe", 2.0, 756.0),
    (r"H100", 3.35, 989.4),  # SXM5 (e.g. "NVIDIA H100 80GB HBM3")
    (r"A100.*80GB PCIe", 1.935, 312.0),
    (r"A100-SXM4-80GB", 2.039, 312.0),
    (r"A100", 1.555, 312.0),  # 40GB
    (r"B200", 8.0, 2250.0),
)


def gpu_peaks(name: str | None) -> dict | None:
    """The datasheet device figures of a GPU by the name CUDA reports; None for one not in the
    table (or no name)."""
    for pattern, tb_s, tflops in GPU_PEAKS:
        if name and re.search(pattern, name):
            return {"copy_bandwidth_tb_s": tb_s, "matmul_tflops": tflops}
    return None


def decode_seconds(
    weight_bytes: float,
    kv_bytes_per_token: float,
    concurrency: int,
    isl: int,
    osl: int,
    bandwidth_bytes_s: float,
) -> float:
    """The least time of the osl decode steps of `concurrency` sequences decoded together."""
    ctx_sum = osl * isl + osl * (osl + 1) / 2  # sum of (isl + j), j = 1..osl
    return (osl * weight_bytes + concurrency * ctx_sum * kv_bytes_per_token) / bandwidth_bytes_s


def point_roofline(shape: dict, concurrency: int, isl: int, osl: int, device: dict) -> dict:
    """Output tok/s limits of a point (decode alone, and with the prefill FLOPs)."""
    bw = device["copy_bandwidth_tb_s"] * 1e12
    dec = decode_seconds(
        shape["weight_bytes"], shape["kv_bytes_per_token"], concurrency, isl, osl, bw
    )
    pre = concurrency * isl * 2 * shape["params"] / (device["matmul_tflops"] * 1e12)
    tokens = concurrency * osl
    return {
        "decode_limit_tok_per_s": tokens / dec,
        "limit_tok_per_s": tokens / (dec + pre),
        "decode_s_min": dec,
        "prefill_s_min": pre,
    }


def workload_roofline(shape: dict, isls: list[int], osls: list[int], device: dict) -> dict:
    """Requests of prompts `isls` and outputs `osls` (in pairs): their output tok/s limit."""
    bw = device["copy_bandwidth_tb_s"] * 1e12
    ctx_sum = sum(o * i + o * (o + 1) / 2 for i, o in zip(isls, osls, strict=True))
    dec = (max(osls) * shape["weight_bytes"] + ctx_sum * shape["kv_bytes_per_token"]) / bw
    pre = sum(isls) * 2 * shape["params"] / (device["matmul_tflops"] * 1e12)
    tokens = sum(osls)
    return {
        "decode_limit_tok_per_s": tokens / dec,
        "limit_tok_per_s": tokens / (dec + pre),
        "decode_s_min": dec,
        "prefill_s_min": pre,
    }
