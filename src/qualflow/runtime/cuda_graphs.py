"""Model steps captured as CUDA graphs. Replaying a graph costs one launch instead of hundreds,
which is what a step costs when the host is slow.

Decode: one graph per (padded batch size, KV-length bucket). A batch of n running requests replays
the smallest captured batch size >= n (pad rows use free slots and are ignored) and the smallest KV
bucket >= the longest context. Prefill of a single request: one graph per padded prompt length,
run on the scratch slot (causal attention ignores the right padding); the caller copies the KV rows
into the request's slot. Inputs go through static buffers; all graphs share one memory pool.
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


class GraphRunner:
    def __init__(self, model, cache: torch.Tensor, max_batch: int, max_len: int, device: torch.device,
                 scratch_slot: int):
        self.model, self.cache, self.device, self.scratch = model, cache, device, scratch_slot
        self.batch_sizes = _buckets(max_batch, [1, 2, 4, 8, 16], 16)
        self.kv_buckets = _buckets(max_len, [256, 512, 1024, 2048], 2048)  # attention reads a bucket, so keep them tight
        self.ids = torch.zeros(max_batch, 1, dtype=torch.long, device=device)
        self.pos = torch.zeros(max_batch, 1, dtype=torch.long, device=device)
        self.zero_index = torch.zeros(max_batch, dtype=torch.long, device=device)
        self.prefill_lens = [t for t in (32, 64, 128, 256, 512, 1024, 2048) if t <= max_len]
        top = self.prefill_lens[-1] if self.prefill_lens else 1
        self.p_ids = torch.zeros(1, top, dtype=torch.long, device=device)
        self.p_pos = torch.arange(top, device=device)[None]
        self.p_last = torch.zeros(1, dtype=torch.long, device=device)
        self.graphs: dict[tuple[int, int], tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self.pool = None
        t0 = time.perf_counter()
        with torch.inference_mode():
            for t in reversed(self.prefill_lens):       # largest first, so the pool fits the rest
                self._capture(-t, t)
            for bs in reversed(self.batch_sizes):
                for kv in reversed(self.kv_buckets):
                    self._capture(bs, kv)
        torch.cuda.synchronize(device)
        self.capture_s = time.perf_counter() - t0

    def _run(self, bs: int, kv: int) -> torch.Tensor:
        if bs < 0:  # prefill graph of -bs tokens on the scratch slot
            return self.model(self.p_ids[:, :kv], self.p_pos[:, :kv], self.cache, self.scratch, kv,
                              logit_index=self.p_last)
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

    def prefill(self, prompt: list[int]) -> torch.Tensor | None:
        """Logits [1, V] at the prompt's last token, KV on the scratch slot; None if too long."""
        n = len(prompt)
        t = next((t for t in self.prefill_lens if t >= n), None)
        if t is None:
            return None
        self.p_ids[0, :n].copy_(torch.tensor(prompt), non_blocking=True)
        self.p_ids[0, n:t].zero_()
        self.p_last.fill_(n - 1)
        g, out = self.graphs[(-t, t)]
        g.replay()
        return out

    def decode(self, ids: torch.Tensor, pos: torch.Tensor, n: int, kv_len: int) -> torch.Tensor:
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
