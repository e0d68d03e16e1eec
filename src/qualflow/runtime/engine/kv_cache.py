"""The KV block pool of one engine: its size from a memory budget, the pool tensor the paged
attention reads and writes, and the BlockManager that keeps its books (and its prefix cache)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..config import EngineConfig
from ..kernels.attention import PagedAttention
from ..kernels.varlen_choice import choose_extend, choose_solo, choose_varlen
from .block_manager import RESERVED_BLOCKS, BlockManager


@dataclass(frozen=True)
class KvCache:
    attention: PagedAttention
    blocks: BlockManager
    max_blocks: int  # blocks of one full-context sequence
    varlen: str  # the varlen attention kernels in use (kernels.varlen_choice)
    extend: str  # how steps past position 0 attend (kernels.varlen_choice.choose_extend)
    solo: str  # how a fresh step of one sequence attends (kernels.varlen_choice.choose_solo)


def free_device_memory(device: torch.device) -> int:
    """Bytes this process can still allocate on a CUDA device: the driver's free memory plus what
    torch's caching allocator holds but no tensor uses (a Task closed before this one in the same
    process leaves its pool there; the driver counts it as used)."""
    free = torch.cuda.mem_get_info(device)[0]
    return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)


def allocate_kv_cache(
    layout: tuple[int, int, int],
    heads: int,
    cfg: EngineConfig,
    context_limit: int,
    device: torch.device,
    dtype: torch.dtype,
) -> KvCache:
    """One pool of fixed-size blocks, sized from a memory budget: `kv_cache_gb`, else on CUDA half
    of the free memory, else (CPU) room for every batch slot at the full context; its bookkeeping
    with the prefix cache unless `cfg.prefix_caching` is off. `layout`: the family's (layers, kv
    heads, head dim)."""
    layers, kv_heads, head_dim = layout
    block_size = cfg.kv_block_size(device.type)
    block_bytes = (
        layers * 2 * block_size * kv_heads * head_dim * torch.empty((), dtype=dtype).element_size()
    )
    per_seq = -(-context_limit // block_size)
    if cfg.kv_cache_gb:
        budget = cfg.kv_cache_gb * 1e9
    elif device.type == "cuda":
        budget = free_device_memory(device) * 0.5
    else:
        budget = block_bytes * cfg.max_batch * per_seq
    # at least one full-context sequence, plus the scratch block
    num_blocks = max(int(budget // block_bytes), per_seq) + RESERVED_BLOCKS
    pool = torch.zeros(
        layers, 2, num_blocks, block_size, kv_heads, head_dim, dtype=dtype, device=device
    )
    attention = PagedAttention(pool, block_size, use_flash=False)
    varlen = choose_varlen(attention, heads, device, dtype, cfg.varlen_attention)
    extend = choose_extend(attention, heads, device, dtype, cfg.extend_attention)
    solo = choose_solo(attention, heads, device, dtype, cfg.solo_prefill_attention)
    attention.extend_tokens = cfg.extend_kernel_tokens
    attention.extend_fresh = attention.extend_kernel and cfg.varlen_attention == "extend"
    if attention.extend_fresh:
        extend += "+fresh"
    blocks = BlockManager(num_blocks, block_size, caching=cfg.prefix_caching)
    return KvCache(attention, blocks, per_seq, varlen, extend, solo)
