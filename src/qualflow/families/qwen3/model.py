"""Qwen3 in plain torch: RMSNorm, RoPE, QK-norm, SwiGLU MLP, tied LM head. Weights are in the
runtime layout (fused qkv and gate_up, see convert.py).

The graph works on a flat, packed token batch ([N] ids and positions, no padding): prefill chunks of
several sequences and decode tokens alike. Attention, and with it the KV cache, belongs to the
caller, who passes it in as a callable; the family knows nothing of blocks or sequences. Nothing in
the forward reads a value back to the host, so a decode step can be captured as a CUDA graph.

Two paths run the same math. Without `ops`, each layer is two halves around attention (compiled on
CUDA, so Inductor fuses their elementwise chains). With `ops` (the runtime's fused kernels, see
`_forward_fused` for the calls it makes), each layer is four GEMMs (the gate_up one with SiLU-mul
fused in where the ops can), attention and three or four fused elementwise ops, nothing compiled;
the caller's attention may also hand out where it keeps a layer's new K/V
(`attend.kv_destination(layer)`), so the q/k op stores them there and attention is told they are
stored, or take the qkv projection as it is and do the q/k op itself (`attend.takes_qkv()`,
`attend.attend_qkv`).
"""

from __future__ import annotations

from collections.abc import Callable
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
    def from_hf(cls, c: dict) -> Qwen3Config:
        rope_theta = c.get("rope_theta") or (c.get("rope_parameters") or {}).get(
            "rope_theta", 1_000_000.0
        )
        return cls(
            c["vocab_size"],
            c["hidden_size"],
            c["num_hidden_layers"],
            c["num_attention_heads"],
            c["num_key_value_heads"],
            c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"],
            c["intermediate_size"],
            c["rms_norm_eps"],
            float(rope_theta),
            c["max_position_embeddings"],
            bool(c.get("tie_word_embeddings", False)),
        )


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return w * xf.to(x.dtype)


def rope_tables(cfg: Qwen3Config, max_len: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (
        cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32) / cfg.head_dim)
    )
    freqs = torch.outer(torch.arange(max_len, dtype=torch.float32), inv)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(device), emb.sin().to(device)


def norm_rope(
    x: torch.Tensor, w: torch.Tensor, eps: float, cos: torch.Tensor, sin: torch.Tensor
) -> torch.Tensor:
    """q/k-norm then RoPE of x [N, heads, D] (cos/sin [N, D], float32), in float32 and rounded once:
    rounding the normed value and the weight product too (as `rms_norm` does for the layer's
    norms) drifts far from the float32 reference on some prompts in fp16 (large q/k norms)."""
    half = x.shape[-1] // 2
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()
    rot = torch.cat([-xf[..., half:], xf[..., :half]], dim=-1)
    return (xf * cos[:, None] + rot * sin[:, None]).to(x.dtype)


class Qwen3Model(nn.Module):
    def __init__(
        self,
        cfg: Qwen3Config,
        weights: dict[str, torch.Tensor],
        max_len: int,
        compile_ops: bool = False,
        ops=None,
    ):
        super().__init__()
        self.cfg, self.ops = cfg, ops
        self.w = (
            weights  # plain dict: the runtime layout, already on device and in the compute dtype
        )
        device = weights["embed"].device
        self.cos, self.sin = rope_tables(cfg, max_len, device)
        self.lm_head = weights.get("lm_head", weights["embed"])
        # On the CPU the logits' product reads the [vocab, hidden] weight transposed, at about
        # half the memory bandwidth of reading a [hidden, vocab] copy (151,936 x 128 fp32: 7.4
        # against 3.1 ms a decode token on one thread, most of the embedded default's step), so a
        # transposed copy serves it there.
        self.lm_head_t = self.lm_head.t().contiguous() if device.type == "cpu" else None
        self.q_size = cfg.num_heads * cfg.head_dim
        self.kv_size = cfg.num_kv_heads * cfg.head_dim
        # A layer is two fused halves around attention (the caller's, which also stores K/V).
        # torch.compile turns each half's elementwise chains into single kernels (GPU speed); eager
        # runs the same math.
        wrap = (lambda f: torch.compile(f, dynamic=True)) if compile_ops else (lambda f: f)
        self.pre, self.post = wrap(self._pre), wrap(self._post)

    def _pre(self, x, w_qkv, w_qn, w_kn, cos, sin):
        cfg = self.cfg
        N = x.shape[0]
        q, k, v = F.linear(x, w_qkv).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        eps = cfg.rms_norm_eps
        q = norm_rope(q.view(N, cfg.num_heads, cfg.head_dim), w_qn, eps, cos, sin)
        k = norm_rope(k.view(N, cfg.num_kv_heads, cfg.head_dim), w_kn, eps, cos, sin)
        return q, k, v.view(N, cfg.num_kv_heads, cfg.head_dim)

    def _post(self, h, a, w_o, w_mn, w_gu, w_d, w_next):
        eps = self.cfg.rms_norm_eps
        h = h + F.linear(a, w_o)
        gate, up = F.linear(rms_norm(h, w_mn, eps), w_gu).chunk(2, dim=-1)
        h = h + F.linear(F.silu(gate) * up, w_d)
        return h, rms_norm(h, w_next, eps)

    def forward(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        attend: Callable,
        logit_index: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """ids, positions: [N] int64, the tokens of one step packed back to back (no padding), any
        mix of sequences. `attend(layer, q [N, H, D], k [N, KV, D], v [N, KV, D]) -> [N, H*D]` is
        the caller's attention: it stores k/v wherever its cache keeps them and knows which tokens
        belong to which sequence. Returns logits [len(logit_index), V] (float32), or [N, V] for
        every token when `logit_index` is None. Nothing here reads a value back to the host."""
        if self.ops is not None:
            return self._forward_fused(ids, positions, attend, logit_index)
        cfg, w = self.cfg, self.w
        cos, sin = self.cos[positions], self.sin[positions]
        h = F.embedding(ids, w["embed"])
        x = rms_norm(h, w["layers.0.attn_norm"], cfg.rms_norm_eps)
        for i in range(cfg.num_layers):
            p = f"layers.{i}."
            q, k, v = self.pre(x, w[p + "qkv"], w[p + "q_norm"], w[p + "k_norm"], cos, sin)
            a = attend(i, q, k, v)
            nxt = w[f"layers.{i + 1}.attn_norm"] if i + 1 < cfg.num_layers else w["norm"]
            h, x = self.post(
                h, a, w[p + "o"], w[p + "mlp_norm"], w[p + "gate_up"], w[p + "down"], nxt
            )
        if logit_index is not None:  # x is the final-normed hidden state
            x = x[logit_index]
        return self.logits(x, F.linear)

    def _forward_fused(self, ids, positions, attend, logit_index):
        """The same layer through `ops`: norm_linear(h, delta | None, w_norm, eps, w) -> (h +
        delta, rms_norm(h + delta) @ w.T) and norm_gate_up_silu (the same with silu(gate) * up
        [N, intermediate]), each the residual add and RMSNorm (add_rms_norm) before the
        projection; qk_norm_rope(qkv, w_qn, w_kn, cos_table, sin_table, positions, heads,
        kv_heads, eps, dest) -> (q, k, v); linear(x, w) -> x @ w.T."""
        cfg, w, ops, eps = self.cfg, self.w, self.ops, self.cfg.rms_norm_eps
        dest_of = getattr(attend, "kv_destination", None)
        h, delta = F.embedding(ids, w["embed"]), None
        for i in range(cfg.num_layers):
            p = f"layers.{i}."
            dest = dest_of(i) if dest_of is not None else None
            h, qkv = ops.norm_linear(h, delta, w[p + "attn_norm"], eps, w[p + "qkv"])
            a = self._attend_fused(i, qkv, positions, attend, dest)
            h, g = ops.norm_gate_up_silu(
                h, ops.linear(a, w[p + "o"]), w[p + "mlp_norm"], eps, w[p + "gate_up"]
            )
            delta = ops.linear(g, w[p + "down"])
        _, x = ops.add_rms_norm(h, delta, w["norm"], eps)
        if logit_index is not None:
            x = x[logit_index]
        return self.logits(x, ops.linear)

    def _attend_fused(self, i: int, qkv, positions, attend, dest):
        """Layer i's attention from its qkv projection: q/k-norm + RoPE through `ops` (storing
        the new K/V at `dest` when given), then `attend`; or, where the caller's attention takes
        the qkv row itself (`attend.takes_qkv()`), `attend.attend_qkv(i, qkv, w_qn, w_kn,
        cos_table, sin_table, positions, eps)`, which does all of it."""
        cfg, w, p = self.cfg, self.w, f"layers.{i}."
        takes_qkv = getattr(attend, "takes_qkv", None)
        norms = w[p + "q_norm"], w[p + "k_norm"], self.cos, self.sin, positions
        if takes_qkv is not None and takes_qkv():
            return attend.attend_qkv(i, qkv, *norms, cfg.rms_norm_eps)
        q, k, v = self.ops.qk_norm_rope(
            qkv, *norms, cfg.num_heads, cfg.num_kv_heads, cfg.rms_norm_eps, dest
        )
        return attend(i, q, k, v, stored=True) if dest is not None else attend(i, q, k, v)

    def logits(self, x: torch.Tensor, linear) -> torch.Tensor:
        """The final-normed hidden states' logits (float32): `linear(x, lm_head)`, or on the CPU
        the product with the transposed copy."""
        if self.lm_head_t is not None:
            return (x @ self.lm_head_t).float()
        return linear(x, self.lm_head).float()
