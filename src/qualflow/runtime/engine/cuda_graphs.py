"""Decode steps captured as CUDA graphs over the paged KV pool. Replaying a graph costs one launch
instead of hundreds, which is what a step costs when the host is slow.

One graph per padded batch size; the attention kernel reads each sequence's block table and context
length from static buffers, so no context-length buckets are needed. A batch of n sequences replays
the smallest captured size >= n; the padding rows write their K/V into the reserved scratch block 0
and attend to it alone. Inputs go through static buffers; all graphs share one memory pool.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from ..kernels.attention import PagedAttention, StepMeta
from ..kernels.paged_decode import splits_for
from .scheduler import Batch


def batch_buckets(max_batch: int) -> list[int]:
    out = [b for b in (1, 2, 4, 8, 16, 24, 32) if b < max_batch]
    b = 48
    while b < max_batch:
        out.append(b)
        b += 16 if b < 128 else 32
    return out + [max_batch]


class DecodeGraphs:
    def __init__(self, model, attention: PagedAttention, max_batch: int, max_blocks: int, device: torch.device,
                 capture: bool = True):
        self.model, self.attn, self.device, self.max_batch = model, attention, device, max_batch
        self.block_size = attention.block_size
        self.kv_heads = attention.k[0].shape[2]
        self.sizes = batch_buckets(max_batch)
        self.max_blocks = max_blocks
        z = lambda *s, dt=torch.long: torch.zeros(*s, dtype=dt, device=device)  # noqa: E731
        self.ids, self.pos, self.slots = z(max_batch), z(max_batch), z(max_batch)
        self.tables, self.lens = z(max_batch, max_blocks, dt=torch.int32), z(max_batch, dt=torch.int32)
        self.host = torch.zeros(3 * max_batch + max_batch * (max_blocks + 1), dtype=torch.long)
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self.pool = None
        self.capture = capture  # False: the same static-buffer step, run eagerly (tests on CPU)
        t0 = time.perf_counter()
        self.lens.fill_(1)
        if capture:
            self.host = self.host.pin_memory()
            with torch.inference_mode():
                for bs in reversed(self.sizes):  # largest first, so the pool fits the rest
                    self._capture(bs)
            torch.cuda.synchronize(device)
        self.capture_s = time.perf_counter() - t0

    def _meta(self, bs: int) -> StepMeta:
        return StepMeta("paged", self.slots[:bs], block_tables=self.tables[:bs], ctx_lens=self.lens[:bs],
                        splits=splits_for(bs, self.kv_heads))

    def _run(self, bs: int) -> torch.Tensor:
        self.attn.meta = self._meta(bs)
        return self.model(self.ids[:bs], self.pos[:bs], self.attn, logit_index=None)

    def _capture(self, bs: int) -> None:
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            self._run(bs)  # warm-up outside capture (compile, autotune, allocator)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=self.pool):
            out = self._run(bs)
        if self.pool is None:
            self.pool = g.pool()
        self.graphs[bs] = (g, out)

    def decode(self, batch: Batch) -> torch.Tensor:
        n = len(batch.seqs)
        bs = next(b for b in self.sizes if b >= n)
        M, BS = self.max_blocks, self.block_size
        # one pinned host buffer -> one copy per static input; padding rows: token 0 at slot 0, context 1
        ids = np.zeros(bs, np.int64)
        pos = np.zeros(bs, np.int64)
        slots = np.zeros(bs, np.int64)
        lens = np.ones(bs, np.int64)
        tables = np.zeros((bs, M), np.int64)
        for i, (seq, p) in enumerate(zip(batch.seqs, batch.starts)):
            ids[i] = seq.token_ids[p]
            pos[i] = p
            tb = seq.block_table
            slots[i] = tb[p // BS] * BS + p % BS
            lens[i] = p + 1
            tables[i, :len(tb)] = tb
        h = self.host.numpy()
        h[:bs], h[bs:2 * bs], h[2 * bs:3 * bs], h[3 * bs:4 * bs] = ids, pos, slots, lens
        h[4 * bs:4 * bs + bs * M] = tables.reshape(-1)
        src = self.host[:4 * bs + bs * M].to(self.device, non_blocking=True)
        self.ids[:bs].copy_(src[:bs])
        self.pos[:bs].copy_(src[bs:2 * bs])
        self.slots[:bs].copy_(src[2 * bs:3 * bs])
        self.lens[:bs].copy_(src[3 * bs:4 * bs])
        self.tables[:bs].copy_(src[4 * bs:].view(bs, M))
        if not self.capture:
            return self._run(bs)[:n]
        g, out = self.graphs[bs]
        g.replay()
        return out[:n]
