"""Fresh prefill steps (every sequence from position 0) captured as CUDA graphs, one per token
bucket, so a short prompt's first token costs a few graph launches instead of the host's per-kernel
cost.

A step of n tokens in S sequences replays the smallest bucket T >= n. Its inputs are padded to the
bucket's fixed shapes: after the S real sequences comes one filler sequence of the T - n pad tokens
(token 0 at positions 0.., writing its K/V to slot 0 of the reserved scratch block and attending to
itself alone), then empty sequences up to the fixed count (cumulative lengths repeat), so the
varlen attention sees the same batch as unpadded for every real token: causal attention never looks
past a sequence's own tokens. The logits are those of each sampling sequence's last token (the rest
of the fixed rows read token 0 and are dropped).

Where fresh steps take the extend kernel (--varlen-attention extend), each layer reads the step's
K/V back from the pool through its block tables (engine.extend_meta.ExtendBuffers, padded like the
extend graphs' tables).

A step of one sequence replays a graph of its own where the attention has a dense path for it
(PagedAttention.solo: cuDNN's dense causal SDPA over the whole padded step; the pad tokens come
after the prompt, so causal attention keeps them out of its rows).

Captured graphs need flash varlen attention (the reference loop reads host lengths); with
`capture=False` the same padded step runs eagerly, which is how CPU tests check the padding.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from ..kernels.attention import PagedAttention, StepMeta
from .cuda_graphs import capture_buckets, capture_step
from .extend_meta import ExtendBuffers
from .scheduler import Batch
from .sequence import put_ids

log = logging.getLogger(__name__)


def token_buckets(max_tokens: int) -> list[int]:
    """16, 32, ... 256 doubling, then steps of 256, up to max_tokens (the last bucket)."""
    out, b = [], 16
    while b < max_tokens:
        out.append(b)
        b = b * 2 if b < 256 else b + 256
    return out + [max_tokens]


@dataclass(frozen=True)
class PaddedStep:
    """A fresh step's inputs padded to `tokens` tokens and `max_seqs` + 1 sequences."""

    tokens: int
    ids: np.ndarray  # [tokens] int64 (a pending token reads 0 here; the device fills it)
    positions: np.ndarray  # [tokens] int64
    slots: np.ndarray  # [tokens] int64
    cu: np.ndarray  # [max_seqs + 2] cumulative sequence lengths
    lens: list[int]  # [max_seqs + 1] sequence lengths (host: the eager reference reads them)
    logit_rows: np.ndarray  # [max_seqs] int64: the last token of each sampling sequence, then 0
    sampling: int  # how many of logit_rows are real


def pad_fresh_step(batch: Batch, tokens: int, max_seqs: int, block_size: int) -> PaddedStep:
    ids = np.zeros(tokens, np.int64)
    pos = np.zeros(tokens, np.int64)
    slots = np.zeros(tokens, np.int64)
    lens, rows, o = [], [], 0
    for seq, n, smp in zip(batch.seqs, batch.counts, batch.samples):
        p = np.arange(n)
        table = np.asarray(seq.block_table, dtype=np.int64)
        put_ids(ids[o : o + n], seq.token_ids[:n])
        pos[o : o + n] = p
        slots[o : o + n] = table[p // block_size] * block_size + p % block_size
        if smp:
            rows.append(o + n - 1)
        lens.append(n)
        o += n
    pos[o:] = np.arange(tokens - o)  # the filler sequence; its slots stay 0 (scratch)
    lens += [tokens - o] + [0] * (max_seqs - len(batch.seqs))
    logit_rows = np.zeros(max_seqs, np.int64)
    logit_rows[: len(rows)] = rows
    return PaddedStep(
        tokens,
        ids,
        pos,
        slots,
        np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
        lens,
        logit_rows,
        len(rows),
    )


class PrefillGraphs:
    def __init__(
        self,
        model,
        attention: PagedAttention,
        max_tokens: int,
        max_seqs: int,
        device: torch.device,
        capture: bool = True,
    ):
        self.model, self.attn, self.device = model, attention, device
        self.block_size, self.max_seqs = attention.block_size, max_seqs
        self.sizes = token_buckets(max_tokens)
        self.max_tokens = self.sizes[-1]
        z = lambda n: torch.zeros(n, dtype=torch.long, device=device)  # noqa: E731
        self.ids, self.pos, self.slots, self.rows = (
            z(self.max_tokens),
            z(self.max_tokens),
            z(self.max_tokens),
            z(max_seqs),
        )
        self.cu = torch.zeros(max_seqs + 2, dtype=torch.int32, device=device)
        self.kernel_in = ExtendBuffers(attention, self.max_tokens, self.max_tokens, max_seqs)
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self.solo_graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self.pool = None
        self.capture = capture
        self.capture_s = capture_buckets(self.sizes, self._capture, device) if capture else 0.0
        self.solo_note = self._capture_solo() if attention.solo else "off"

    def fits(self, batch: Batch) -> bool:
        return (
            all(s == 0 for s in batch.starts)
            and len(batch.seqs) <= self.max_seqs
            and batch.num_tokens <= self.max_tokens
        )

    def _run(self, t: int, lens: list[int], dense: bool = False) -> torch.Tensor:
        """The padded forward; `lens`: the host sequence lengths the eager reference reads (a
        graph is captured with the bucket as the bound flash attention takes); `dense`: one
        sequence, through the attention's dense path."""
        meta = StepMeta("varlen", self.slots[:t], self.cu, self.cu, lens, lens, None, dense=dense)
        if not dense and self.attn.extends(t, fresh=True):
            meta = self.kernel_in.meta(meta, t, t)
        self.attn.meta = meta
        return self.model(self.ids[:t], self.pos[:t], self.attn, logit_index=self.rows)

    def _capture(self, t: int) -> None:
        self.cu.copy_(torch.tensor([0] + [t] * (self.max_seqs + 1), dtype=torch.int32))
        g, out = capture_step(lambda: self._run(t, [t]), self.device, self.pool)
        if self.pool is None:
            self.pool = g.pool()
        self.graphs[t] = (g, out)

    def _capture_solo(self) -> str:
        """The dense steps of one sequence (PagedAttention.solo), a graph a bucket, captured after
        the others (on CUDA); what became of them."""
        if not self.capture:
            return "eager"

        def one(t: int) -> None:
            self.solo_graphs[t] = capture_step(
                lambda: self._run(t, [t], True), self.device, self.pool
            )

        try:
            capture_buckets(self.sizes, one, self.device)
        except Exception as e:  # noqa: BLE001 - a lone prompt then runs as any step
            self.solo_graphs.clear()
            log.exception("dense prefill graph capture failed")
            return f"off: capture failed: {type(e).__name__}: {e}"
        return "captured"

    def prefill(
        self,
        batch: Batch,
        fills: tuple[list[int], list[int]] = ((), ()),
        prev: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits [sampling sequences, V] of a fresh step. `fills`: (index in the step's tokens,
        row of `prev`) of the input tokens still on the device (see model_runner.pending_fills)."""
        t = next(b for b in self.sizes if b >= batch.num_tokens)
        solo = (
            len(batch.seqs) == 1
            and bool(self.attn.solo)
            and (not self.capture or t in self.solo_graphs)
        )
        step = pad_fresh_step(batch, t, self.max_seqs, self.block_size)
        at, rows = fills
        f, s = len(at), self.max_seqs
        # the extend kernel's tiles and tables, where it runs the step
        kernel = (
            self.kernel_in.host(batch, t, t)
            if not solo and self.attn.extends(t, fresh=True)
            else np.empty(0, np.int64)
        )
        # one host buffer -> one copy: ids, pos, slots [t each], logit rows [s], cu [s + 2], fills
        # [2 x f], the kernel's part
        end = 3 * t + 2 * s + 2 + 2 * f
        host = torch.empty(
            end + kernel.size, dtype=torch.long, pin_memory=self.device.type == "cuda"
        )
        h = host.numpy()
        h[: 3 * t] = np.concatenate([step.ids, step.positions, step.slots])
        h[3 * t : 3 * t + s] = step.logit_rows
        h[3 * t + s : 3 * t + 2 * s + 2] = step.cu
        h[3 * t + 2 * s + 2 : end] = np.asarray(list(at) + list(rows), np.int64)
        h[end:] = kernel
        src = host.to(self.device, non_blocking=True)
        self.ids[:t].copy_(src[:t])
        self.pos[:t].copy_(src[t : 2 * t])
        self.slots[:t].copy_(src[2 * t : 3 * t])
        self.rows.copy_(src[3 * t : 3 * t + s])
        self.cu.copy_(src[3 * t + s : 3 * t + 2 * s + 2])
        if f:
            o = 3 * t + 2 * s + 2
            self.ids.index_copy_(0, src[o : o + f], prev.index_select(0, src[o + f : o + 2 * f]))
        if kernel.size:
            self.kernel_in.fill(src[end:], t, t)
        if not self.capture:
            return self._run(t, step.lens, solo)[: step.sampling]
        g, out = (self.solo_graphs if solo else self.graphs)[t]
        g.replay()
        return out[: step.sampling]
