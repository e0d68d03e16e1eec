"""The physical limit of a benchmark point, from the model shape and the measured device figures.

A point is `concurrency` requests in flight, each a prompt of `isl` tokens and `osl` output tokens.
  - decode: every step reads all the weights once plus the K/V of every running sequence at its
    context, so step j (context isl + j for each of the c sequences) takes at least
    (weight bytes + c * (isl + j) * KV bytes per token) / copy bandwidth;
  - prefill: 2 * params FLOPs per prompt token at the measured matmul peak.
The limit is c * osl output tokens over the sum of both. `copy_bandwidth` counts bytes read plus
bytes written, the same count a step's reads are compared with.

The offline workload (requests of different lengths, all submitted at once) is bounded the same
way (`workload_roofline`): at least as many decode steps as its longest output, each reading all the
weights, every output token reading its sequence's K/V at its context, and the prefill FLOPs."""

from __future__ import annotations

import time

import torch


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
    """`shape`: params, weight_bytes, kv_bytes_per_token; `device`: copy_bandwidth_tb_s,
    matmul_tflops. Output tok/s limits (decode alone, and with the prefill FLOPs)."""
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


def model_shape(task) -> dict:
    """Parameters, their bytes as loaded, and the K/V bytes of one token (all layers, K and V)."""
    w = task.model.w
    pool = task.engine.runner.attn.pool  # [layers, 2, blocks, block_size, kv_heads, head_dim]
    L, two, _, _, kv, d = pool.shape
    return {
        "params": sum(v.numel() for v in w.values()),
        "weight_bytes": sum(v.numel() * v.element_size() for v in w.values()),
        "kv_bytes_per_token": L * two * kv * d * pool.element_size(),
    }


def _timed(device: torch.device, fn, repeats: int) -> float:
    """Seconds per call of fn, after warm-up (device events on cuda, the wall clock elsewhere)."""
    for _ in range(3):
        fn()
    if device.type == "cuda":
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(repeats):
            fn()
        e.record()
        torch.cuda.synchronize(device)
        return s.elapsed_time(e) / 1e3 / repeats
    t = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t) / repeats


def copy_bandwidth(device: torch.device, gb: float = 2.0) -> float:
    """TB/s of a device-to-device copy, bytes read + written."""
    n = int(gb * 1e9) // 2
    a, b = (
        torch.empty(n, dtype=torch.float16, device=device),
        torch.empty(n, dtype=torch.float16, device=device),
    )
    sec = _timed(device, lambda: b.copy_(a), 10)
    return 2 * a.numel() * 2 / sec / 1e12


def matmul_tflops(device: torch.device, n: int = 8192, dtype: torch.dtype = torch.float16) -> float:
    """Dense matmul throughput (the prefill peak), TFLOP/s."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    sec = _timed(device, lambda: a @ b, 10)
    return 2 * n**3 / sec / 1e12
