"""Attention over the paged KV pool, passed to the family's model graph as its `attend` callable.

The pool is one tensor [layers, 2, blocks, block_size, kv_heads, head_dim]; a token at position p of
a sequence lives at slot block_table[p // block_size] * block_size + p % block_size. Each call
stores the step's new K/V at their slots, then attends according to the step's metadata:
  - varlen: packed queries of several sequences (prefill chunks, or decode tokens outside a graph).
    A fresh step (every sequence starts at position 0) attends over the new K/V directly; otherwise
    each sequence's whole context is gathered from the pool, or, where the extend kernel was chosen
    and checked at load (varlen_choice.choose_extend), read from it through the block tables by
    one Triton kernel with context splits (paged_extend.py). On CUDA one varlen call covers the
    batch: flash attention's, or cuDNN's SDPA with ragged offsets where it was chosen and checked
    at load (varlen_choice.py: fresh steps, or every varlen step); elsewhere (CPU) one SDPA call
    per sequence. A `dense` fresh step (one prompt, padded: a captured prefill graph of its own)
    runs torch's dense causal SDPA over the whole step, through cuDNN where that was chosen and
    checked at load (varlen_choice.choose_solo).
  - paged: one query per sequence, read straight from the block table by a Triton kernel (the decode
    step captured as a CUDA graph). With `rope_inside` that kernel also takes the layer's qkv row
    as the projection wrote it and does the q/k-norm + RoPE and the K/V store (`attend_qkv`).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from .destination import KvDestination


@dataclass
class StepMeta:
    mode: str  # "varlen" or "paged"
    slot_mapping: torch.Tensor | None  # [N] int64, where the new K/V go; None: store nothing
    cu_q: torch.Tensor | None = None  # [S+1] int32 (varlen)
    cu_k: torch.Tensor | None = None  # [S+1] int32 (varlen)
    q_lens: list[int] | None = None  # host copies (varlen)
    k_lens: list[int] | None = None
    ctx_slots: torch.Tensor | None = (
        None  # [sum k_lens] int64; None: fresh step, attend the new K/V
    )
    block_tables: torch.Tensor | None = None  # [B, max_blocks] int32 (paged; int64 for extend)
    ctx_lens: torch.Tensor | None = None  # [B] int32 (paged; int64 for extend)
    splits: int = 1  # paged, extend: context partitions per (sequence or tile, head)
    tiles: torch.Tensor | None = (
        None  # [T, 4] int64: a varlen step past position 0 through the extend kernel
    )
    counters: torch.Tensor | None = (
        None  # paged, splits > 1: the kernel's arrival counters (persistent, zero)
    )
    dense: bool = False  # varlen, fresh: the step is one causal sequence (a lone prompt, then
    # its padding): torch's dense SDPA over it (PagedAttention.solo)


class PagedAttention:
    def __init__(self, pool: torch.Tensor, block_size: int, use_flash: bool):
        self.pool, self.block_size, self.use_flash = pool, block_size, use_flash
        L, _, nb, bs, kv, d = pool.shape
        self.k = [pool[i, 0] for i in range(L)]  # [blocks, block_size, KV, D] views
        self.v = [pool[i, 1] for i in range(L)]
        self.k_flat = [t.view(nb * bs, kv, d) for t in self.k]
        self.v_flat = [t.view(nb * bs, kv, d) for t in self.v]
        self.meta: StepMeta | None = None
        self.gqa_native = True  # flash varlen reads grouped K/V without repeating them
        # cuDNN's varlen SDPA (varlen_choice.py): for fresh steps, for steps over the pool's
        # context, and whether it needs grouped K/V repeated to every query head
        self.cudnn_fresh = self.cudnn_chunked = self.cudnn_repeat_kv = False
        self.pdl = False  # the paged kernel launches with programmatic dependent launch
        # steps past position 0 of at most extend_tokens new tokens through paged_extend (set at
        # load: varlen_choice.choose_extend, EngineConfig.extend_kernel_tokens); its splits fill
        # this many SMs
        self.extend_kernel, self.extend_tokens, self.sms, self.heads = False, 0, 1, 1
        self.extend_fresh = False  # fresh steps too (--varlen-attention extend)
        # paged steps take the qkv row raw and do q/k-norm + RoPE + the K/V store in the decode
        # kernel (set at load: EngineConfig.rope_in_attention, paged_decode.rope_self_check)
        self.rope_inside = False
        # a `dense` step (a fresh step of one sequence): "cudnn" (cuDNN's dense SDPA, grouped K/V
        # as they are), "cudnn-repeat-kv", "sdpa" (torch's default backend: the CPU reference);
        # "" none take that path (set at load: varlen_choice.choose_solo)
        self.solo = ""
        from .paged_decode import runs_on

        self.paged_kernel = runs_on(
            pool
        )  # else the paged step runs the plain-torch reference (CPU tests)

    def extends(self, tokens: int, fresh: bool = False) -> bool:
        """Whether a prefill step of `tokens` new tokens takes the extend kernel: one past position
        0, or a fresh one where fresh steps take it too (`extend_fresh`)."""
        return (
            self.extend_kernel and tokens <= self.extend_tokens and (self.extend_fresh or not fresh)
        )

    def kv_destination(self, layer: int) -> KvDestination | None:
        """Where this step's new K/V of `layer` go (None: nothing is stored), for a fused op that
        stores them itself and then calls with `stored=True`."""
        m = self.meta
        if m.slot_mapping is None:
            return None
        return KvDestination(self.k_flat[layer], self.v_flat[layer], m.slot_mapping)

    def takes_qkv(self) -> bool:
        """Whether this step's attention takes each layer's qkv row as the projection wrote it
        (`attend_qkv`): a paged step that stores its new K/V, with `rope_inside`."""
        m = self.meta
        return self.rope_inside and m.mode == "paged" and m.slot_mapping is not None

    def attend_qkv(self, layer: int, qkv, w_qn, w_kn, cos_table, sin_table, positions, eps: float):
        """A `takes_qkv` step's attention from its qkv row [N, (H + 2 KV) * D]: per-head RMSNorm
        of q and k (weights w_qn, w_kn), RoPE at `positions` from the cos/sin tables, the new K/V
        stored at the step's slots and the attention, in the decode kernel. Returns [N, H * D]."""
        from .paged_decode import QkRope

        rope = QkRope(w_qn, w_kn, cos_table, sin_table, positions, self.meta.slot_mapping, eps)
        return self._paged(layer, qkv, rope)

    def _paged(self, layer: int, q: torch.Tensor, rope=None) -> torch.Tensor:
        """A paged step's attention [N, H * D]: the decode kernel, or on the CPU (tests, without
        Triton's interpreter) the same step in plain torch; `rope` (paged_decode.QkRope): q is
        the qkv row."""
        from .paged_decode import paged_decode, reference

        m = self.meta
        args = (q, self.k[layer], self.v[layer], m.block_tables, m.ctx_lens)
        if not self.paged_kernel:
            return reference(*args, rope=rope).view(q.shape[0], -1)
        out = paged_decode(*args, m.splits, counters=m.counters, pdl=self.pdl, rope=rope)
        return out.view(q.shape[0], -1)

    def __call__(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, stored: bool = False
    ) -> torch.Tensor:
        m = self.meta
        if m.slot_mapping is not None and not stored:
            self.k_flat[layer].index_copy_(0, m.slot_mapping, k)
            self.v_flat[layer].index_copy_(0, m.slot_mapping, v)
        N, H, D = q.shape
        if m.mode == "paged":
            return self._paged(layer, q)
        if m.dense:
            return self._dense(q, k, v).reshape(N, H * D)
        if m.tiles is not None:
            return self._extend(layer, q, m).view(N, H * D)
        if m.ctx_slots is None:
            K, V, cudnn = k, v, self.cudnn_fresh
        else:
            K, V = self.k_flat[layer][m.ctx_slots], self.v_flat[layer][m.ctx_slots]
            cudnn = self.cudnn_chunked
        if cudnn:
            return self._cudnn(q, K, V, m).reshape(N, H * D)
        if self.use_flash:
            return self._flash(q, K, V, m).reshape(N, H * D)
        return varlen_sdpa(q, K, V, m.q_lens, m.k_lens).reshape(N, H * D)

    def _extend(self, layer: int, q: torch.Tensor, m: StepMeta) -> torch.Tensor:
        from . import paged_extend

        run = paged_extend.paged_extend if paged_extend.runs_on(q) else paged_extend.reference
        return run(q, self.k[layer], self.v[layer], m.tiles, m.block_tables, m.ctx_lens, m.splits)

    def _flash(self, q, K, V, m: StepMeta) -> torch.Tensor:
        if not self.gqa_native:
            K, V = repeat_kv(q, K, V)
        return torch.ops.aten._flash_attention_forward(
            q, K, V, m.cu_q, m.cu_k, max(m.q_lens), max(m.k_lens), 0.0, True, False
        )[0]

    def _dense(self, q, K, V) -> torch.Tensor:
        """A `dense` step's attention [N, H, D]: its N tokens as one causal sequence. The padding
        after a lone prompt attends to it too, but no real token attends to the padding."""
        if self.solo.endswith("repeat-kv"):
            K, V = repeat_kv(q, K, V)
        return dense_causal(q, K, V, cudnn=self.solo.startswith("cudnn"))

    def _cudnn(self, q, K, V, m: StepMeta) -> torch.Tensor:
        """cuDNN's SDPA over the packed batch (ragged offsets cu_q / cu_k), causal."""
        if self.cudnn_repeat_kv:
            K, V = repeat_kv(q, K, V)
        return torch.ops.aten._cudnn_attention_forward(
            q.contiguous(),
            K.contiguous(),
            V.contiguous(),
            None,
            m.cu_q,
            m.cu_k,
            max(m.q_lens),
            max(m.k_lens),
            True,
            0.0,
            True,
            False,
        )[0]


def dense_causal(q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, cudnn: bool) -> torch.Tensor:
    """Causal attention of one packed sequence, q [N, H, D] over K/V [N, KV, D], through torch's
    dense SDPA: cuDNN's kernel only (`cudnn`), else torch's choice."""
    qt, kt, vt = (t.transpose(0, 1).unsqueeze(0) for t in (q, K, V))
    gqa = kt.shape[1] != qt.shape[1]
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]) if cudnn else nullcontext():
        o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, enable_gqa=gqa)
    return o[0].transpose(0, 1)


def repeat_kv(q: torch.Tensor, K: torch.Tensor, V: torch.Tensor):
    """K/V [N, KV, D] repeated to q's heads, for a kernel that cannot read grouped K/V (as they
    are where the counts already match)."""
    if K.shape[1] == q.shape[1]:
        return K, V
    n = q.shape[1] // K.shape[1]
    return K.repeat_interleave(n, dim=1), V.repeat_interleave(n, dim=1)


def varlen_sdpa(
    q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, q_lens: list[int], k_lens: list[int]
) -> torch.Tensor:
    """Reference varlen attention: sequence i's queries are the last q_lens[i] of its k_lens[i]
    positions (causal, aligned bottom-right). q [Nq, H, D], K/V [Nk, KV, D]. A sequence of no
    tokens (a padded step's filler) is skipped."""
    out = torch.empty_like(q)
    q0 = k0 = 0
    for lq, lk in zip(q_lens, k_lens):
        if lq == 0:
            k0 += lk
            continue
        qi = q[q0 : q0 + lq].transpose(0, 1)
        ki, vi = K[k0 : k0 + lk].transpose(0, 1), V[k0 : k0 + lk].transpose(0, 1)
        if lq == lk:
            o = F.scaled_dot_product_attention(qi, ki, vi, is_causal=True, enable_gqa=True)
        else:
            mask = (
                torch.arange(lk, device=q.device)[None, :]
                <= torch.arange(lk - lq, lk, device=q.device)[:, None]
            )
            o = F.scaled_dot_product_attention(qi, ki, vi, attn_mask=mask, enable_gqa=True)
        out[q0 : q0 + lq] = o.transpose(0, 1)
        q0, k0 = q0 + lq, k0 + lk
    return out
