"""Qwen3 in plain torch: RMSNorm, RoPE, grouped-query attention with QK-norm over a slot KV cache,
SwiGLU MLP, tied LM head. Weights are in the runtime layout (fused qkv and gate_up, see convert.py).

The KV cache is one tensor [layers, 2, slots, kv_heads, max_len, head_dim] owned by the caller
(head-major, so attention reads a slot range as a plain view, no copy).
A forward pass works on `B` consecutive slots starting at `slot0`: row b of the batch is slot
slot0 + b, its tokens sit at `positions[b]`. Keys are written into the cache first, then every query
attends to the cache prefix [0, kv_len) under the mask key_pos <= query_pos. Prefill and decode are the
same code; nothing in it reads a value back to the host, so a decode step can be captured as a graph.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class Qwen3Config:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool

    @classmethod
    def from_hf(cls, c: dict) -> "Qwen3Config":
        rope_theta = c.get("rope_theta") or (c.get("rope_parameters") or {}).get("rope_theta", 1_000_000.0)
        return cls(c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
                   c["num_key_value_heads"], c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"],
                   c["intermediate_size"], c["rms_norm_eps"], float(rope_theta),
                   c["max_position_embeddings"], bool(c.get("tie_word_embeddings", False)))


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return w * xf.to(x.dtype)


def rope_tables(cfg: Qwen3Config, max_len: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32) / cfg.head_dim))
    freqs = torch.outer(torch.arange(max_len, dtype=torch.float32), inv)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(device), emb.sin().to(device)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x [B, T, heads, D]; cos/sin [B, T, D] (float32)
    half = x.shape[-1] // 2
    xf = x.float()
    rot = torch.cat([-xf[..., half:], xf[..., :half]], dim=-1)
    return (xf * cos[:, :, None] + rot * sin[:, :, None]).to(x.dtype)


def attention(q: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Grouped-query attention over the cache prefix without repeating K/V per query head.
    q [B, T, H, D]; kc, vc [B, KV, L, D]; mask [B, T, L] (True = attend). Returns [B, T, H*D]."""
    B, T, H, D = q.shape
    KV = kc.shape[1]
    qg = q.view(B, T, KV, H // KV, D)
    s = torch.einsum("btkgd,bkld->bkgtl", qg, kc).float() * D ** -0.5
    p = s.masked_fill(~mask[:, None, None], float("-inf")).softmax(-1).to(vc.dtype)
    return torch.einsum("bkgtl,bkld->btkgd", p, vc).reshape(B, T, H * D)


class Qwen3Model(nn.Module):
    def __init__(self, cfg: Qwen3Config, weights: dict[str, torch.Tensor], max_len: int,
                 compile_ops: bool = False):
        super().__init__()
        self.cfg = cfg
        self.w = weights  # plain dict: the runtime layout, already on device and in the compute dtype
        device = weights["embed"].device
        self.cos, self.sin = rope_tables(cfg, max_len, device)
        self.lm_head = weights.get("lm_head", weights["embed"])
        self.q_size = cfg.num_heads * cfg.head_dim
        self.kv_size = cfg.num_kv_heads * cfg.head_dim
        # A layer is two fused halves around the (eager) KV-cache write. torch.compile turns each
        # half's elementwise chains into single kernels (GPU speed); eager runs the same math.
        wrap = (lambda f: torch.compile(f, dynamic=True)) if compile_ops else (lambda f: f)
        self.pre, self.post = wrap(self._pre), wrap(self._post)

    def _pre(self, x, w_qkv, w_qn, w_kn, cos, sin):
        cfg = self.cfg
        B, T, _ = x.shape
        q, k, v = F.linear(x, w_qkv).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = apply_rope(rms_norm(q.view(B, T, cfg.num_heads, cfg.head_dim), w_qn, cfg.rms_norm_eps), cos, sin)
        k = apply_rope(rms_norm(k.view(B, T, cfg.num_kv_heads, cfg.head_dim), w_kn, cfg.rms_norm_eps), cos, sin)
        return q, torch.stack([k, v.view(B, T, cfg.num_kv_heads, cfg.head_dim)], dim=2)  # [B, T, 2, KV, D]

    def _post(self, h, q, kc, vc, mask, w_o, w_mn, w_gu, w_d, w_next, kv_new):
        eps = self.cfg.rms_norm_eps
        if kv_new is None:  # decode: attend over the cache
            a = attention(q, kc, vc, mask)
        else:  # fresh prefill: causal attention over the new keys alone (a fused kernel on GPU)
            B, T, H, D = q.shape
            k, v = kv_new.unbind(2)
            a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               is_causal=True, enable_gqa=True).transpose(1, 2).reshape(B, T, H * D)
        h = h + F.linear(a, w_o)
        gate, up = F.linear(rms_norm(h, w_mn, eps), w_gu).chunk(2, dim=-1)
        h = h + F.linear(F.silu(gate) * up, w_d)
        return h, rms_norm(h, w_next, eps)

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, cache: torch.Tensor, slot0: int,
                kv_len: int, logit_index: torch.Tensor | None = None) -> torch.Tensor:
        """ids, positions: [B, T] int64. Returns logits [B, V] at `logit_index` ([B], position in T)
        or, when it is None, logits for every token [B, T, V]. Writes the batch's keys/values.
        A call with T > 1 is a fresh prefill: every row starts at position 0 (right padding allowed),
        so attention is causal over the new tokens; T == 1 is a decode step over the cache."""
        cfg, w = self.cfg, self.w
        B, T = ids.shape
        cos, sin = self.cos[positions], self.sin[positions]
        rows = torch.arange(slot0, slot0 + B, device=ids.device)[:, None].expand(B, T)
        # decode attends over the cache under key_pos <= query_pos; prefill is causal SDPA, no mask
        mask = torch.arange(kv_len, device=ids.device)[None, None, :] <= positions[:, :, None] if T == 1 else None
        h = F.embedding(ids, w["embed"])
        x = rms_norm(h, w["layers.0.attn_norm"], cfg.rms_norm_eps)
        for i in range(cfg.num_layers):
            p = f"layers.{i}."
            q, kv = self.pre(x, w[p + "qkv"], w[p + "q_norm"], w[p + "k_norm"], cos, sin)
            cache[i][:, rows, :, positions] = kv  # one scatter writes K and V
            nxt = w[f"layers.{i + 1}.attn_norm"] if i + 1 < cfg.num_layers else w["norm"]
            h, x = self.post(h, q, cache[i, 0, slot0:slot0 + B, :, :kv_len], cache[i, 1, slot0:slot0 + B, :, :kv_len],
                             mask, w[p + "o"], w[p + "mlp_norm"], w[p + "gate_up"], w[p + "down"], nxt,
                             kv if T > 1 else None)
        if logit_index is not None:  # x is the final-normed hidden state
            x = x[torch.arange(B, device=ids.device), logit_index]
        return F.linear(x, self.lm_head).float()
