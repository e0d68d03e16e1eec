"""GPU time of a callable, call by call: the kernel benchmarks' figure (benchmarks/kernels/)."""

from __future__ import annotations

import statistics

import torch


def median_gpu_ms(fn, repeats: int = 100, warmup: int = 5) -> float:
    """The median over `repeats` calls of `fn`'s GPU time in ms (CUDA events around each call),
    after `warmup` calls (compilation, autotuning, the allocator)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)
