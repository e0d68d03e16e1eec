"""The decode step captured as CUDA graphs: one graph per (padded batch size, KV-length bucket).

Replaying a graph costs one launch instead of hundreds. Inputs go through static buffers; a batch of
n running requests replays the smallest captured batch size >= n (pad rows use free slots and are
ignored), and the smallest KV bucket >= the longest context. Graphs share one memory pool.
"""
from __future__ import annotations

import time

import torch


def _buckets(limit: int, first: list[int], step: int) -> list[int]:
    out = [b for b in first if b < limit]
    b = first[-1] + step if first else step
    while b < limit:
        out.append(b)
        b += step
    return out + [limit]


class GraphDecodeRunner:
    def __init__(self, model, cache: torch.Tensor, max_batch: int, max_len: int, device: torch.device):
        self.model, self.cache, self.device = model, cache, device
        self.batch_sizes = _buckets(max_batch, [1, 2, 4, 8, 16], 16)
        self.kv_buckets = _buckets(max_len, [256, 512, 1024, 2048], 2048)  # attention reads a bucket, so keep them tight
        self.ids = torch.zeros(max_batch, 1, dtype=torch.long, device=device)
        self.pos = torch.zeros(max_batch, 1, dtype=torch.long, device=device)
        self.zero_index = torch.zeros(max_batch, dtype=torch.long, device=device)
        self.graphs: dict[tuple[int, int], tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self.pool = None
        t0 = time.perf_counter()
        with torch.inference_mode():
            for bs in reversed(self.batch_sizes):       # largest first, so the pool fits the rest
                for kv in reversed(self.kv_buckets):
                    self._capture(bs, kv)
        torch.cuda.synchronize(device)
        self.capture_s = time.perf_counter() - t0

    def _run(self, bs: int, kv: int) -> torch.Tensor:
        return self.model(self.ids[:bs], self.pos[:bs], self.cache, 0, kv, logit_index=self.zero_index[:bs])

    def _capture(self, bs: int, kv: int) -> None:
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            self._run(bs, kv)  # warm-up outside capture (allocator, lazy init)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):
            out = self._run(bs, kv)
        if self.pool is None:
            self.pool = g.pool()
        self.graphs[(bs, kv)] = (g, out)

    def __call__(self, ids: torch.Tensor, pos: torch.Tensor, n: int, kv_len: int) -> torch.Tensor:
        bs = next(b for b in self.batch_sizes if b >= n)
        kv = next(k for k in self.kv_buckets if k >= kv_len)
        self.ids[:n].copy_(ids, non_blocking=True)
        self.pos[:n].copy_(pos, non_blocking=True)
        if bs > n:  # pad rows: free slots, position 0
            self.ids[n:bs].zero_()
            self.pos[n:bs].zero_()
        g, out = self.graphs[(bs, kv)]
        g.replay()
        return out[:n]
