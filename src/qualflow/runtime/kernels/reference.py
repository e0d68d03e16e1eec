"""The torch reference of the fused layer kernels (kernels.fused): the CPU path, and what each
kernel is checked against. Each rounds where the family's plain layer rounds (the residual sum,
the normalised value before the weight and the weight product of the layer's RMSNorm, silu before
the product; q/k-norm + RoPE rounds once, at the end)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .destination import KvDestination


def ref_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return w * xf.to(x.dtype)


def ref_add_rms_norm(h: torch.Tensor, delta: torch.Tensor | None, w: torch.Tensor, eps: float):
    """(h + delta, rms_norm(h + delta)); delta None: (h, rms_norm(h))."""
    if delta is not None:
        h = h + delta
    return h, ref_rms_norm(h, w, eps)


def ref_qk_norm_rope(
    qkv,
    w_qn,
    w_kn,
    cos_table,
    sin_table,
    positions,
    heads: int,
    kv_heads: int,
    eps: float,
    dest: KvDestination | None = None,
):
    """qkv [N, (H + 2 KV) * D] -> q [N, H, D], k, v [N, KV, D]; k and v also stored at dest."""
    N, D = qkv.shape[0], w_qn.shape[0]
    q, k, v = qkv.split([heads * D, kv_heads * D, kv_heads * D], dim=-1)
    cos, sin = cos_table[positions], sin_table[positions]
    q = qk_norm_rope_f32(q.view(N, heads, D), w_qn, eps, cos, sin)
    k = qk_norm_rope_f32(k.view(N, kv_heads, D), w_kn, eps, cos, sin)
    v = v.view(N, kv_heads, D)
    if dest is not None:
        dest.k_cache.index_copy_(0, dest.slots, k)
        dest.v_cache.index_copy_(0, dest.slots, v)
    return q, k, v


def qk_norm_rope_f32(
    x: torch.Tensor, w: torch.Tensor, eps: float, cos: torch.Tensor, sin: torch.Tensor
) -> torch.Tensor:
    """RMSNorm of each head of x [N, heads, D] times w, then RoPE (cos/sin [N, D], float32), in
    float32 throughout and rounded once to x's dtype. Rounding the normalised value and the weight
    product to fp16 as well, as the model's own RMSNorm does, took the @tools correctness prompts'
    KL against the float32 reference from about 0.006 to 0.26 on an H100 (random weights: large
    q/k norms turn those roundings into large attention-score errors)."""
    half = x.shape[-1] // 2
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()
    rot = torch.cat([-xf[..., half:], xf[..., :half]], dim=-1)
    return (xf * cos[:, None] + rot * sin[:, None]).to(x.dtype)


def ref_silu_mul(y: torch.Tensor) -> torch.Tensor:
    gate, up = y.chunk(2, dim=-1)
    return F.silu(gate) * up
