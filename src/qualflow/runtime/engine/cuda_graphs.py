"""Decode steps captured as CUDA graphs over the paged KV pool. Replaying a graph costs one launch
instead of hundreds, which is what a step costs when the host is slow.

One graph per padded batch size; the attention kernel reads each sequence's block table and context
length from static buffers, so no context-length buckets are needed. A batch of n sequences replays
the smallest captured size >= n; the padding rows write their K/V into the reserved scratch block 0
and attend to it alone. Inputs go through static buffers, the block tables updated in place (only
the entries a row does not hold yet); all graphs share one memory pool. The host side of each copy
is a fresh pinned buffer from torch's caching host allocator, which does not hand it out again
before its copy has run: the host may build step n+1 while step n's copy still waits its turn.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from ..kernels.attention import PagedAttention, StepMeta
from ..kernels.paged_decode import splits_for
from .scheduler import Batch


def capture_step(run, device: torch.device, pool) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """`run`, a step over static buffers, captured as a CUDA graph in memory pool `pool` (None: a
    new one) after one warm-up on a side stream (compile, autotune, allocator); the graph and its
    output."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        run()
    torch.cuda.current_stream(device).wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g, pool=pool):
            out = run()
    except Exception:
        release_generator(device)
        raise
    return g, out


def release_generator(device: torch.device) -> None:
    """After a failed capture, the device's default generator as it was: the capture registered it
    and only a capture that ends cleanly releases it, so the next random op outside a graph (a
    sampled token) would fail ("Offset increment outside graph capture"). Its state, cloned, is a
    released one with the same seed and offset."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    gen = torch.cuda.default_generators[index]
    gen.graphsafe_set_state(gen.clone_state())


def capture_buckets(sizes: list[int], capture_one, device: torch.device) -> float:
    """`capture_one(size)` for every bucket, largest first (so that one memory pool fits the rest);
    the seconds it took."""
    t0 = time.perf_counter()
    with torch.inference_mode():
        for size in reversed(sizes):
            capture_one(size)
    torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def batch_buckets(max_batch: int) -> list[int]:
    out = [b for b in (1, 2, 4, 8, 16, 24, 32) if b < max_batch]
    b = 48
    while b < max_batch:
        out.append(b)
        b += 16 if b < 128 else 32
    return out + [max_batch]


class DecodeGraphs:
    def __init__(
        self,
        model,
        attention: PagedAttention,
        max_batch: int,
        max_blocks: int,
        device: torch.device,
        capture: bool = True,
    ):
        self.model, self.attn, self.device, self.max_batch = model, attention, device, max_batch
        self.block_size = attention.block_size
        self.kv_heads = attention.k[0].shape[2]
        self.sizes = batch_buckets(max_batch)
        self.max_blocks = max_blocks
        z = lambda *s, dt=torch.long: torch.zeros(*s, dtype=dt, device=device)  # noqa: E731
        self.ids, self.pos, self.slots = z(max_batch), z(max_batch), z(max_batch)
        self.tables, self.lens = (
            z(max_batch, max_blocks, dt=torch.int32),
            z(max_batch, dt=torch.int32),
        )
        self.counters = z(
            max_batch * self.kv_heads, dt=torch.int32
        )  # the paged kernel's, left at zero by it
        self.rows: list[tuple[list[int] | None, int]] = [
            (None, 0)
        ] * max_batch  # (table, entries) on the device
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self.pool = None
        self.capture = capture  # False: the same static-buffer step, run eagerly (tests on CPU)
        self.lens.fill_(1)
        self.capture_s = capture_buckets(self.sizes, self._capture, device) if capture else 0.0

    def _meta(self, bs: int) -> StepMeta:
        return StepMeta(
            "paged",
            self.slots[:bs],
            block_tables=self.tables[:bs],
            ctx_lens=self.lens[:bs],
            splits=splits_for(bs, self.kv_heads),
            counters=self.counters,
        )

    def _run(self, bs: int) -> torch.Tensor:
        self.attn.meta = self._meta(bs)
        return self.model(self.ids[:bs], self.pos[:bs], self.attn, logit_index=None)

    def _capture(self, bs: int) -> None:
        g, out = capture_step(lambda: self._run(bs), self.device, self.pool)
        if self.pool is None:
            self.pool = g.pool()
        self.graphs[bs] = (g, out)

    def decode(
        self,
        batch: Batch,
        fills: tuple[list[int], list[int]] = ((), ()),
        prev: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits [n, V] of a decode step. `fills`: (row, row of `prev`) of the input tokens
        still on the device (see model_runner.pending_fills)."""
        n = len(batch.seqs)
        bs = next(b for b in self.sizes if b >= n)
        at, rows = fills
        small, idx, vals = self._host_inputs(batch, bs)
        # one host buffer -> one copy: ids, pos, slots, lens [bs each], fills [2 x f], table entries
        # [2 x k]
        f, k = len(at), len(idx)
        host = torch.empty(
            4 * bs + 2 * f + 2 * k, dtype=torch.long, pin_memory=self.device.type == "cuda"
        )
        h = host.numpy()
        h[: 4 * bs] = small.reshape(-1)
        h[4 * bs : 4 * bs + 2 * f] = np.asarray(list(at) + list(rows), np.int64)
        h[4 * bs + 2 * f :] = np.asarray(idx + vals, np.int64)
        src = host.to(self.device, non_blocking=True)
        self.ids[:bs].copy_(src[:bs])
        self.pos[:bs].copy_(src[bs : 2 * bs])
        self.slots[:bs].copy_(src[2 * bs : 3 * bs])
        self.lens[:bs].copy_(src[3 * bs : 4 * bs])
        o = 4 * bs
        if f:
            self.ids.index_copy_(0, src[o : o + f], prev.index_select(0, src[o + f : o + 2 * f]))
        if k:
            o += 2 * f
            self.tables.view(-1).index_copy_(0, src[o : o + k], src[o + k :].to(torch.int32))
        if not self.capture:
            return self._run(bs)[:n]
        g, out = self.graphs[bs]
        g.replay()
        return out[:n]

    def forget(self) -> None:
        """Something else wrote the device tables: send every row whole at its next step."""
        self.rows = [(None, 0)] * self.max_batch

    def _host_inputs(self, batch: Batch, bs: int) -> tuple[np.ndarray, list[int], list[int]]:
        """The step's small inputs [4, bs] (ids, pos, slots, lens; padding rows: token 0 at slot 0,
        context 1), and the block-table entries the device does not hold yet (flat index, block).
        The device tables persist across steps: a row keeps the entries uploaded for the block
        table it holds, so a running sequence only sends a block when it gains one; a row that gets
        another sequence (or the same one after preemption, with a new table) is sent whole."""
        M, BS = self.max_blocks, self.block_size
        small = np.zeros((4, bs), np.int64)
        small[3] = 1
        idx: list[int] = []
        vals: list[int] = []
        for i, (seq, p) in enumerate(zip(batch.seqs, batch.starts)):
            tb = seq.block_table
            small[0, i] = max(seq.token_ids[p], 0)  # a placeholder is filled on the device
            small[1, i] = p
            small[2, i] = tb[p // BS] * BS + p % BS
            small[3, i] = p + 1
            held, have = self.rows[i]
            have = have if held is tb else 0
            if len(tb) > have:
                idx.extend(range(i * M + have, i * M + len(tb)))
                vals.extend(tb[have:])
            self.rows[i] = (tb, len(tb))
        return small, idx, vals
