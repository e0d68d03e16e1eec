"""Turns a scheduled batch into the model's packed inputs and attention metadata, runs one forward
and returns the logits of the sequences that sample this step. Decode-only steps replay a captured
CUDA graph when there is one for the batch size; every other step runs eagerly (compiled ops)."""
from __future__ import annotations

import numpy as np
import torch

from ..kernels.attention import PagedAttention, StepMeta
from .scheduler import Batch


class ModelRunner:
    def __init__(self, model, attention: PagedAttention, device: torch.device, graphs=None):
        self.model, self.attn, self.device, self.graphs = model, attention, device, graphs
        self.block_size = attention.block_size

    def run(self, batch: Batch) -> torch.Tensor:
        """Logits [number of sampling sequences, V] in batch order."""
        if self.graphs is not None and batch.is_decode and len(batch.seqs) <= self.graphs.max_batch:
            return self.graphs.decode(batch)
        ids, pos, slots, cu_q, cu_k, ctx = [], [], [], [0], [0], []
        fresh = all(s == 0 for s in batch.starts)
        for seq, start, n in zip(batch.seqs, batch.starts, batch.counts):
            p = np.arange(start, start + n)
            table = np.asarray(seq.block_table, dtype=np.int64)
            ids.append(seq.token_ids[start:start + n])
            pos.append(p)
            slots.append(table[p // self.block_size] * self.block_size + p % self.block_size)
            cu_q.append(cu_q[-1] + n)
            cu_k.append(cu_k[-1] + start + n)
            if not fresh:
                c = np.arange(start + n)
                ctx.append(table[c // self.block_size] * self.block_size + c % self.block_size)
        last = [cu_q[i + 1] - 1 for i, smp in enumerate(batch.samples) if smp]
        dev = self.device
        meta = StepMeta(
            "varlen", torch.from_numpy(np.concatenate(slots)).to(dev, non_blocking=True),
            torch.tensor(cu_q, dtype=torch.int32).to(dev, non_blocking=True),
            torch.tensor(cu_k, dtype=torch.int32).to(dev, non_blocking=True),
            list(batch.counts), [s + n for s, n in zip(batch.starts, batch.counts)],
            None if fresh else torch.from_numpy(np.concatenate(ctx)).to(dev, non_blocking=True))
        ids_t = torch.tensor([t for chunk in ids for t in chunk], dtype=torch.long).to(dev, non_blocking=True)
        pos_t = torch.from_numpy(np.concatenate(pos)).to(dev, non_blocking=True)
        self.attn.meta = meta
        return self.model(ids_t, pos_t, self.attn, logit_index=torch.tensor(last, dtype=torch.long).to(dev))

    def score(self, token_ids: list[int]) -> torch.Tensor:
        """Teacher-forced logits [T, V] for one sequence; its K/V are not stored."""
        n = len(token_ids)
        cu = torch.tensor([0, n], dtype=torch.int32, device=self.device)
        self.attn.meta = StepMeta("varlen", None, cu, cu, [n], [n], None)
        return self.model(torch.tensor(token_ids, device=self.device), torch.arange(n, device=self.device),
                          self.attn, logit_index=None)
