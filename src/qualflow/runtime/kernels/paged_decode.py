"""Decode attention that reads the block table itself (flash-decoding over the paged pool), as one
Triton kernel: one program per (sequence, kv head, context split) runs an online softmax over its
share of the sequence's blocks for all the query heads of its group. With one split (a large batch)
it writes the output; with several (a small batch, so that the step fills the GPU) the last split to
finish merges the others' partial outputs, found by an arrival counter, so a layer's attention is
one launch, not two. No host sync and no data-dependent shapes, so it is captured inside the decode
CUDA graph.
The kernels are in kernels.paged_decode_kernels; this module launches them.
`reference` is the same computation in plain torch (tests)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

try:
    import triton
except ImportError:  # CPU-only installs: the paged path is not used there
    triton = None

from . import paged_decode_kernels as kernels
from .pdl import options


def available() -> bool:
    return triton is not None


def runs_on(t: torch.Tensor) -> bool:
    """Whether the kernel can take `t`: a CUDA tensor, or any under Triton's interpreter
    (TRITON_INTERPRET=1, the tests). A CPU tensor where Triton is installed but not interpreting
    takes the reference (Triton finds no driver there)."""
    return available() and (t.is_cuda or os.environ.get("TRITON_INTERPRET") == "1")


def splits_for(batch: int, kv_heads: int, sms: int = 132) -> int:
    """Context partitions so that a step has about two programs per multiprocessor, at most 8: the
    merging program reads every split's partial, so beyond 8 more splits cost more than they gain
    (benchmarks/kernels/paged_decode_tune.py; its figures are in docs/performance.md)."""
    s = 1
    while batch * kv_heads * s < 2 * sms and s < 8:
        s *= 2
    return s


@dataclass(frozen=True)
class Launch:
    """Triton's warps and pipeline stages for the kernel."""

    num_warps: int = 4
    num_stages: int = 2


def launch_for(splits: int) -> Launch:
    """The settings a grid chose (benchmarks/kernels/paged_decode_tune.py, the one-kernel form;
    its figures are in docs/performance.md): near the grid's best at every decode shape of the
    0.6B engine. With several splits the merging program does more work, and eight warps do it
    faster."""
    return Launch(num_warps=8) if splits > 1 else Launch()


def paged_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    ctx_lens: torch.Tensor,
    splits: int = 1,
    launch: Launch | None = None,
    counters: torch.Tensor | None = None,
    pdl: bool = False,
) -> torch.Tensor:
    """q [B, H, D]; k/v_cache [blocks, block_size, KV, D]; block_tables [B, M] int32; ctx_lens [B]
    int32 (>= 1, the query's own token included). Returns [B, H, D] in q's dtype.

    One kernel: with one split its programs write the output; with several, the last split of
    each (sequence, kv head) merges them, counting arrivals in `counters` (int32, at least B *
    KV, zero, and left at zero: the caller keeps one across calls). Without `counters` a second
    kernel merges. `launch`: None for `launch_for(splits)`. `pdl`: launch with programmatic
    dependent launch (kernels.pdl)."""
    B, H, D = q.shape
    _, BS, KV, _ = k_cache.shape
    group = H // KV
    launch = launch or launch_for(splits)
    out = torch.empty_like(q)
    part = torch.empty(B, H, splits, D, dtype=torch.float32, device=q.device) if splits > 1 else out
    lse = (
        torch.empty(B, H, splits, dtype=torch.float32, device=q.device) if splits > 1 else ctx_lens
    )
    merge_here = splits > 1 and counters is not None
    if counters is not None and counters.numel() < B * KV:
        raise ValueError(
            f"paged_decode: {counters.numel()} counters for {B} x {KV} (sequence, kv head) pairs"
        )
    cnt = counters if merge_here else ctx_lens
    lse_s = lse.stride() if splits > 1 else (0, 0)
    kernels._split_kernel[(B, KV, splits)](
        q,
        k_cache,
        v_cache,
        block_tables,
        ctx_lens,
        part,
        lse,
        out,
        cnt,
        D**-0.5,
        q.stride(0),
        q.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        block_tables.stride(0),
        part.stride(0),
        part.stride(1),
        part.stride(2) if splits > 1 else 0,
        lse_s[0],
        lse_s[1],
        out.stride(0),
        out.stride(1),
        GROUP=group,
        GROUP_PAD=max(16, triton.next_power_of_2(group)),
        BLOCK=BS,
        D=D,
        SPLITS=splits,
        MERGE_HERE=merge_here,
        PDL=pdl,
        num_warps=launch.num_warps,
        num_stages=launch.num_stages,
        **options(pdl),
    )
    if splits > 1 and not merge_here:
        _merge_apart(part, lse, out, splits, pdl)
    return out


def _merge_apart(part: torch.Tensor, lse: torch.Tensor, out: torch.Tensor, splits: int, pdl: bool):
    """The splits' partials merged into `out` by a second kernel (no arrival counters given)."""
    B, H, _, D = part.shape
    kernels._merge_kernel[(B, H)](
        part,
        lse,
        out,
        part.stride(0),
        part.stride(1),
        part.stride(2),
        lse.stride(0),
        lse.stride(1),
        out.stride(0),
        out.stride(1),
        D=D,
        SPLITS=splits,
        PDL=pdl,
        **options(pdl),
    )


def reference(q, k_cache, v_cache, block_tables, ctx_lens) -> torch.Tensor:
    B, H, D = q.shape
    BS = k_cache.shape[1]
    out = torch.empty_like(q)
    for b in range(B):
        n = int(ctx_lens[b])
        blocks = block_tables[b, : -(-n // BS)].long()
        k = k_cache[blocks].flatten(0, 1)[:n].transpose(0, 1).float()  # [KV, n, D]
        v = v_cache[blocks].flatten(0, 1)[:n].transpose(0, 1).float()
        o = torch.nn.functional.scaled_dot_product_attention(
            q[b].float()[:, None], k, v, enable_gqa=True
        )
        out[b] = o[:, 0].to(q.dtype)
    return out
