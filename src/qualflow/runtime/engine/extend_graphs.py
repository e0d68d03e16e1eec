"""Prefill steps that continue sequences past position 0 (a prompt after its cached prefix, a later
chunk of a long prompt) captured as CUDA graphs, one per (token bucket, context bucket) pair, so a
cached turn's prefill costs a few graph launches instead of the host's per-kernel cost.

A step of n new tokens in S sequences whose contexts (positions 0 to the step's last, per sequence)
sum to k rows replays the smallest token bucket T >= n and the smallest context bucket C >= k +
T - n. Its inputs are padded to the pair's fixed shapes: after the S real sequences come two
fillers, then empty sequences up to the fixed count (cumulative lengths repeat):
  - the T - n pad tokens, one sequence of as many context rows, attending to themselves alone
    (token 0 at positions 0.., their K/V written to the scratch slot, as in a fresh padded step);
  - a sequence of no queries holding the other C - k - (T - n) context rows: attention skips it.
Each layer gathers the step's C context rows from the pool (the fillers' rows read the scratch
slot), so varlen attention sees every real sequence exactly as the unpadded step does; flash
attention takes T and C as its bounds (an over-estimate is fine). The logits are those of each
sampling sequence's last token.

Where the extend kernel was chosen (kernels.paged_extend), each layer reads the context through
the block tables instead (engine.extend_meta.padded_extend: the real sequences' tiles, then the
pads' tiles on a sequence of no context); the tile table and the tables are padded to the pair's
fixed shapes too, and the context split count is fixed per token bucket.

Captured graphs need flash varlen attention (the reference loop reads host lengths); with
`capture=False` the same padded step runs eagerly, which is how CPU tests check the padding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..kernels.attention import PagedAttention, StepMeta
from .cuda_graphs import capture_buckets, capture_step
from .extend_meta import ExtendBuffers
from .scheduler import Batch
from .sequence import put_ids


def context_buckets(limit: int, smallest: int = 512) -> list[int]:
    """smallest, doubling, up to `limit` (the last bucket)."""
    out, b = [], smallest
    while b < limit:
        out.append(b)
        b *= 2
    return out + [limit]


def bucket_pairs(tokens: list[int], contexts: list[int]) -> list[tuple[int, int]]:
    """The (token bucket, context bucket) pairs a step can replay: a step continuing a sequence has
    more context rows than tokens, so only pairs with T < C."""
    return [(t, c) for t in tokens for c in contexts if t < c]


@dataclass(frozen=True)
class ExtendStep:
    """A non-fresh step's inputs padded to `tokens` tokens, `context` context rows and
    `max_seqs` + 2 sequences."""

    tokens: int
    context: int
    ids: np.ndarray  # [tokens] int64 (a pending token reads 0 here; the device fills it)
    positions: np.ndarray  # [tokens] int64
    slots: np.ndarray  # [tokens] int64: where the new K/V go
    ctx: np.ndarray  # [context] int64: the slots each sequence attends to, in order
    cu_q: np.ndarray  # [max_seqs + 3]
    cu_k: np.ndarray  # [max_seqs + 3]
    q_lens: list[int]  # [max_seqs + 2] (host: the eager reference reads them)
    k_lens: list[int]
    logit_rows: np.ndarray  # [max_seqs] int64: the last token of each sampling sequence, then 0
    sampling: int  # how many of logit_rows are real


def _cumulative(lens: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)


def pad_extend_step(
    batch: Batch, tokens: int, context: int, max_seqs: int, block_size: int
) -> ExtendStep:
    ids = np.zeros(tokens, np.int64)
    pos = np.zeros(tokens, np.int64)
    slots = np.zeros(tokens, np.int64)
    ctx = np.zeros(context, np.int64)
    q_lens, k_lens, rows, o, k = [], [], [], 0, 0
    for seq, start, n, smp in zip(batch.seqs, batch.starts, batch.counts, batch.samples):
        table = np.asarray(seq.block_table, dtype=np.int64)
        every = (table[:, None] * block_size + np.arange(block_size)).reshape(-1)
        put_ids(ids[o : o + n], seq.token_ids[start : start + n])
        pos[o : o + n] = np.arange(start, start + n)
        slots[o : o + n] = every[start : start + n]
        ctx[k : k + start + n] = every[: start + n]
        if smp:
            rows.append(o + n - 1)
        q_lens.append(n)
        k_lens.append(start + n)
        o, k = o + n, k + start + n
    pad = tokens - o
    if k + pad > context:
        raise ValueError(
            f"{k} context rows and {pad} pads do not fit a context bucket of {context}"
        )
    pos[o:] = np.arange(pad)  # the pads' filler sequence; its slots and context rows stay 0
    empty = [0] * (max_seqs - len(batch.seqs))
    q_lens += [pad, 0] + empty
    k_lens += [pad, context - k - pad] + empty
    logit_rows = np.zeros(max_seqs, np.int64)
    logit_rows[: len(rows)] = rows
    return ExtendStep(
        tokens,
        context,
        ids,
        pos,
        slots,
        ctx,
        _cumulative(q_lens),
        _cumulative(k_lens),
        q_lens,
        k_lens,
        logit_rows,
        len(rows),
    )


class ExtendGraphs:
    def __init__(
        self,
        model,
        attention: PagedAttention,
        tokens: list[int],
        contexts: list[int],
        max_seqs: int,
        device: torch.device,
        capture: bool = True,
        pool=None,
    ):
        """`tokens`, `contexts`: the buckets; `pool`: the memory pool to capture into (the fresh
        prefill graphs', shared: the steps never run at once), or None."""
        self.model, self.attn, self.device = model, attention, device
        self.block_size, self.max_seqs = attention.block_size, max_seqs
        self.pairs = bucket_pairs(tokens, contexts)
        self.tokens = sorted({t for t, _ in self.pairs})
        self.contexts = sorted({c for _, c in self.pairs})
        t_max, c_max = self.tokens[-1], self.contexts[-1]
        z = lambda n: torch.zeros(n, dtype=torch.long, device=device)  # noqa: E731
        self.ids, self.pos, self.slots, self.ctx = z(t_max), z(t_max), z(t_max), z(c_max)
        self.rows = z(max_seqs)
        self.cu_q = torch.zeros(max_seqs + 3, dtype=torch.int32, device=device)
        self.cu_k = torch.zeros(max_seqs + 3, dtype=torch.int32, device=device)
        self.kernel_in = ExtendBuffers(attention, t_max, c_max, max_seqs)  # where extends()
        self.graphs: dict[tuple[int, int], tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self.pool, self.capture = pool, capture
        self.capture_s = capture_buckets(self.pairs, self._capture, device) if capture else 0.0

    def pick(self, batch: Batch) -> tuple[int, int] | None:
        """The (token, context) buckets the step replays, None when none fits it (it then runs
        eagerly): a fresh step (the fresh prefill graphs' own), too many sequences, tokens or
        context rows."""
        n = batch.num_tokens
        if all(s == 0 for s in batch.starts) or len(batch.seqs) > self.max_seqs:
            return None
        t = next((b for b in self.tokens if b >= n), None)
        if t is None:
            return None
        k = sum(s + c for s, c in zip(batch.starts, batch.counts)) + t - n
        c = next((b for b in self.contexts if b >= k), None)
        return None if c is None else (t, c)

    def _run(self, t: int, c: int, q_lens: list[int], k_lens: list[int]) -> torch.Tensor:
        """The padded forward; `q_lens`, `k_lens`: the host lengths the eager reference reads (a
        graph is captured with the buckets as the bounds flash attention takes)."""
        meta = StepMeta(
            "varlen", self.slots[:t], self.cu_q, self.cu_k, q_lens, k_lens, self.ctx[:c]
        )
        if self.attn.extends(t):
            meta = self.kernel_in.meta(meta, t, c)
        self.attn.meta = meta
        return self.model(self.ids[:t], self.pos[:t], self.attn, logit_index=self.rows)

    def _capture(self, pair: tuple[int, int]) -> None:
        t, c = pair
        rest = self.max_seqs + 1
        self.cu_q.copy_(torch.tensor([0] + [t] * (rest + 1), dtype=torch.int32))
        self.cu_k.copy_(torch.tensor([0] + [c] * (rest + 1), dtype=torch.int32))
        g, out = capture_step(lambda: self._run(t, c, [t], [c]), self.device, self.pool)
        if self.pool is None:
            self.pool = g.pool()
        self.graphs[pair] = (g, out)

    def extend(
        self,
        batch: Batch,
        fills: tuple[list[int], list[int]] = ((), ()),
        prev: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits [sampling sequences, V] of a step `pick` fits. `fills`: (index in the step's
        tokens, row of `prev`) of the input tokens still on the device (see
        model_runner.pending_fills)."""
        t, c = self.pick(batch)
        step = pad_extend_step(batch, t, c, self.max_seqs, self.block_size)
        at, rows = fills
        f, s = len(at), self.max_seqs
        # the extend kernel's tiles and tables, where it runs the step
        kernel = self.kernel_in.host(batch, t, c) if self.attn.extends(t) else np.empty(0, np.int64)
        # one host buffer -> one copy: ids, pos, slots [t each], logit rows [s], cu_q, cu_k
        # [s + 3 each], context rows [c], fills [2 x f], the kernel's part
        end = 3 * t + 3 * s + 6 + c + 2 * f
        host = torch.empty(
            end + kernel.size, dtype=torch.long, pin_memory=self.device.type == "cuda"
        )
        h = host.numpy()
        o = 3 * t + s
        h[:o] = np.concatenate([step.ids, step.positions, step.slots, step.logit_rows])
        h[o : o + 2 * s + 6] = np.concatenate([step.cu_q, step.cu_k])
        h[o + 2 * s + 6 : o + 2 * s + 6 + c] = step.ctx
        h[o + 2 * s + 6 + c : end] = np.asarray(list(at) + list(rows), np.int64)
        h[end:] = kernel
        src = host.to(self.device, non_blocking=True)
        self.ids[:t].copy_(src[:t])
        self.pos[:t].copy_(src[t : 2 * t])
        self.slots[:t].copy_(src[2 * t : 3 * t])
        self.rows.copy_(src[3 * t : o])
        self.cu_q.copy_(src[o : o + s + 3])
        self.cu_k.copy_(src[o + s + 3 : o + 2 * s + 6])
        o += 2 * s + 6
        self.ctx[:c].copy_(src[o : o + c])
        if f:
            self.ids.index_copy_(
                0, src[o + c : o + c + f], prev.index_select(0, src[o + c + f : o + c + 2 * f])
            )
        if kernel.size:
            self.kernel_in.fill(src[end:], t, c)
        if not self.capture:
            return self._run(t, c, step.q_lens, step.k_lens)[: step.sampling]
        g, out = self.graphs[(t, c)]
        g.replay()
        return out[: step.sampling]
