"""Turns a scheduled batch into the model's packed inputs and attention metadata, runs one forward
and returns the logits of the sequences that sample this step. Decode-only steps replay a captured
CUDA graph when there is one for the batch size, fresh prefill steps one for their token bucket
(prefill_graphs.py), prefill steps past position 0 (a cached prefix, a later chunk) one for their
token and context buckets (extend_graphs.py); every other step runs eagerly. `path` names what the
last step ran (a benchmark reads it).

A token still on the device (Sequence.pending: sampled by the step in flight, not read back) is
taken from that step's tokens (`prev`) by a device-side copy, so building a step never waits for
the previous one. Every host-to-device copy here is non-blocking for the same reason."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from ..kernels.attention import PagedAttention, StepMeta
from ..kernels.paged_extend import Launch, splits_for
from .extend_meta import eager_extend
from .scheduler import Batch
from .sequence import put_ids
from .spec import EngineSpec
from .transfer import to_device


def pending_fills(batch: Batch) -> tuple[list[int], list[int]]:
    """(index in the step's packed tokens, row in the previous step's tokens) of every input token
    that is still a placeholder. Only a sequence's last token can be one."""
    at, rows, offset = [], [], 0
    for seq, start, n in zip(batch.seqs, batch.starts, batch.counts):
        last = len(seq.token_ids) - 1
        if seq.pending is not None and start <= last < start + n:
            at.append(offset + last - start)
            rows.append(seq.pending[1])
        offset += n
    return at, rows


class ModelRunner:
    def __init__(
        self,
        spec: EngineSpec,
        model,
        attention: PagedAttention,
        graphs=None,
        prefill=None,
        extend=None,
    ):
        """`graphs`: DecodeGraphs, `prefill`: PrefillGraphs, `extend`: ExtendGraphs, each or
        None."""
        self.model, self.attn, self.device, self.graphs = model, attention, spec.device, graphs
        self.prefill, self.extend = prefill, extend
        self.block_size = attention.block_size
        self.path = ""  # "decode-graph", "prefill-graph", "extend-graph" or "eager"

    def run(self, batch: Batch, prev: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [number of sampling sequences, V] in batch order. `prev`: the tokens sampled by
        the step before, on the device (needed when an input token is pending)."""
        at, rows = pending_fills(batch)
        if at and prev is None:
            raise RuntimeError("a pending input token without the step that samples it")
        if self.graphs is not None and batch.is_decode and len(batch.seqs) <= self.graphs.max_batch:
            self.path = "decode-graph"
            return self.graphs.decode(batch, (at, rows), prev)
        if self.prefill is not None and self.prefill.fits(batch):
            self.path = "prefill-graph"
            return self.prefill.prefill(batch, (at, rows), prev)
        if self.extend is not None and self.extend.pick(batch) is not None:
            self.path = "extend-graph"
            return self.extend.extend(batch, (at, rows), prev)
        self.path = "eager"
        ids = np.empty(batch.num_tokens, np.int64)
        pos, slots, cu_q, cu_k, ctx = [], [], [0], [0], []
        fresh = all(s == 0 for s in batch.starts)
        kernel = self.attn.extends(batch.num_tokens, fresh)
        for seq, start, n in zip(batch.seqs, batch.starts, batch.counts):
            p = np.arange(start, start + n)
            table = np.asarray(seq.block_table, dtype=np.int64)
            put_ids(ids[cu_q[-1] : cu_q[-1] + n], seq.token_ids[start : start + n])
            pos.append(p)
            slots.append(table[p // self.block_size] * self.block_size + p % self.block_size)
            cu_q.append(cu_q[-1] + n)
            cu_k.append(cu_k[-1] + start + n)
            if not fresh and not kernel:
                c = np.arange(start + n)
                ctx.append(table[c // self.block_size] * self.block_size + c % self.block_size)
        last = [cu_q[i + 1] - 1 for i, smp in enumerate(batch.samples) if smp]
        dev = self.device
        meta = StepMeta(
            "varlen",
            to_device(np.concatenate(slots), dev),
            to_device(cu_q, dev, torch.int32),
            to_device(cu_k, dev, torch.int32),
            list(batch.counts),
            [s + n for s, n in zip(batch.starts, batch.counts)],
            None if fresh or kernel else to_device(np.concatenate(ctx), dev),
        )
        if kernel:
            meta = self._extend_meta(meta, batch)
        ids_t = to_device(ids, dev)
        if at:
            ids_t.index_copy_(0, to_device(at, dev), prev.index_select(0, to_device(rows, dev)))
        self.attn.meta = meta
        return self.model(
            ids_t, to_device(np.concatenate(pos), dev), self.attn, logit_index=to_device(last, dev)
        )

    def _extend_meta(self, meta: StepMeta, batch: Batch) -> StepMeta:
        """`meta` with the extend kernel's tables (engine.extend_meta): a step past position 0."""
        t = eager_extend(batch, Launch().block_m)
        dev = self.device
        return dataclasses.replace(
            meta,
            tiles=to_device(t.tiles, dev),
            block_tables=to_device(t.tables, dev),
            ctx_lens=to_device(t.ctx_lens, dev),
            splits=splits_for(len(t.tiles), self.attn.heads, self.attn.sms),
        )

    def score(self, token_ids: list[int]) -> torch.Tensor:
        """Teacher-forced logits [T, V] for one sequence; its K/V are not stored."""
        n = len(token_ids)
        cu = torch.tensor([0, n], dtype=torch.int32, device=self.device)
        self.attn.meta = StepMeta("varlen", None, cu, cu, [n], [n], None)
        return self.model(
            torch.tensor(token_ids, device=self.device),
            torch.arange(n, device=self.device),
            self.attn,
            logit_index=None,
        )
