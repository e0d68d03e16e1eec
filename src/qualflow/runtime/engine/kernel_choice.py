"""Which of the runtime's own kernels an engine runs, each after its self-check at this model's
shapes on this device: the fused layer ops and the projection kernels behind them (`fused_ops`),
and the decode kernel's q/k-norm + RoPE (`rope_inside`). A kernel that fails its check never
serves: the path before it runs, and why is logged."""

from __future__ import annotations

import logging

import torch

from ..config import EngineConfig
from ..kernels import fused, gemv, norm_gemv, paged_decode, skinny_gemm
from .kv_cache import KvCache

log = logging.getLogger("qualflow.engine")


def fused_ops(
    config: dict,
    kv_layout: tuple[int, int, int],
    cfg: EngineConfig,
    fast: bool,
    device: torch.device,
    dtype: torch.dtype,
    pdl_on: bool = False,
) -> tuple[fused.FusedOps | None, str]:
    """The fused layer ops and what runs them: "triton" on CUDA when every kernel agreed with its
    reference at this model's shapes, "torch reference" on CPU (or eager); None ("off ...") with
    --no-fused-kernels or when the check failed (then the compiled halves run, and why is said)."""
    if not cfg.fused_kernels:
        return None, "off"
    if not fast:
        return fused.FusedOps(use_triton=False), "torch reference"
    _, kv_heads, head_dim = kv_layout
    heads, hidden, inter = (
        int(config[k]) for k in ("num_attention_heads", "hidden_size", "intermediate_size")
    )
    why = fused.self_check(device, dtype, heads, kv_heads, head_dim, hidden, inter, pdl=pdl_on)
    if why is not None and pdl_on:  # the kernels may still run without programmatic launch
        log.warning(
            "fused kernels with programmatic dependent launch: %s; checking them without it", why
        )
        pdl_on = False
        why = fused.self_check(device, dtype, heads, kv_heads, head_dim, hidden, inter)
    if why is not None:
        return None, f"off (self-check failed: {why})"
    rows, one_row = cfg.skinny_gemm_rows, cfg.one_row_gemv
    # every projection's weight shape: qkv, o, gate_up (also fused with SiLU-mul), down, lm_head
    shapes = [
        ((heads + 2 * kv_heads) * head_dim, hidden),
        (hidden, heads * head_dim),
        (2 * inter, hidden),
        (hidden, inter),
        (int(config["vocab_size"]), hidden),
    ]
    if rows and (why := skinny_gemm.self_check(device, dtype, shapes, shapes[2], pdl_on)):
        log.warning("skinny GEMM off: %s", why)
        rows = 0
    if rows and one_row and (why := gemv.self_check(device, dtype, shapes, shapes[2], pdl_on)):
        log.warning("one-row GEMV off: %s", why)
        one_row = False
    normed = bool(rows and one_row and cfg.norm_gemv)
    qkv_gate_up = [shapes[0], shapes[2]]  # the projections after an RMSNorm
    if normed and (why := norm_gemv.self_check(device, dtype, qkv_gate_up, [False, True], pdl_on)):
        log.warning("the RMSNorm in the one-row GEMV off: %s", why)
        normed = False
    ops = fused.FusedOps(
        use_triton=True, skinny_rows=rows, pdl=pdl_on, one_row_gemv=one_row, norm_gemv=normed
    )
    return ops, "triton"


def rope_inside(
    config: dict, kv: KvCache, ops: fused.FusedOps | None, cfg: EngineConfig, pdl_on: bool
) -> bool:
    """Whether the decode kernel does the q/k-norm + RoPE and the K/V store itself: asked for,
    the fused layer's kernels on (the family's fused path is the one that hands it the qkv row),
    and its self-check at this model's shapes passed (else the separate kernel runs, and why is
    logged)."""
    if not (cfg.rope_in_attention and ops is not None and ops.use_triton):
        return False
    pool = kv.attention.pool
    shape = (int(config["num_attention_heads"]), pool.shape[-2], pool.shape[-1])
    why = paged_decode.rope_self_check(
        pool.device, pool.dtype, shape, kv.attention.block_size, pdl_on
    )
    if why is not None:
        log.warning("q/k-norm + RoPE inside decode attention off: %s", why)
    return why is None
