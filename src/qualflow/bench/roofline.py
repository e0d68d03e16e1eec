"""The engine benchmark's roofline inputs: the loaded model's shape (`model_shape`) and the
device's measured copy bandwidth (bytes read plus bytes written, the same count a step's reads are
compared with) and matmul peak. The roofline itself is qualflow.roofline's."""

from __future__ import annotations

import time

import torch


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
