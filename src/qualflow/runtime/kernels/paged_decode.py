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
from .checks import agrees
from .destination import KvDestination
from .pdl import options
from .reference import ref_qk_norm_rope


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
class QkRope:
    """q/k-norm + RoPE inside decode attention (the kernel's ROPE_IN form, kernels.qk_norm_rope's
    computation): the per-head RMSNorm weights of q and k [D], the cos/sin tables [positions, D]
    (float32), each row's position and KV slot [B] int64, and the norm's eps."""

    w_q: torch.Tensor
    w_k: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor
    positions: torch.Tensor
    slots: torch.Tensor
    eps: float

    def args(self) -> tuple:
        """The kernel's arguments WQ, WK, COS, SIN, POS, SLOT, eps, s_tab."""
        tables = (self.w_q, self.w_k, self.cos, self.sin, self.positions, self.slots)
        return (*tables, self.eps, self.cos.stride(0))


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
    rope: QkRope | None = None,
) -> torch.Tensor:
    """q [B, H, D]; k/v_cache [blocks, block_size, KV, D]; block_tables [B, M] int32; ctx_lens [B]
    int32 (>= 1, the query's own token included). Returns [B, H, D] in q's dtype.

    With `rope`, q is the step's qkv projection [B, (H + 2 KV) * D] as it came out, and the kernel
    does the q/k-norm + RoPE and stores the new key and value at `rope.slots` itself (the pool's
    slot of each query's own position is not read).

    One kernel: with one split its programs write the output; with several, the last split of
    each (sequence, kv head) merges them, counting arrivals in `counters` (int32, at least B *
    KV, zero, and left at zero: the caller keeps one across calls). Without `counters` a second
    kernel merges. `launch`: None for `launch_for(splits)`. `pdl`: launch with programmatic
    dependent launch (kernels.pdl)."""
    (B, width), (_, BS, KV, D) = q.shape[:2], k_cache.shape
    H = width if rope is None else width // D - 2 * KV
    launch = launch or launch_for(splits)
    out = torch.empty(B, H, D, dtype=q.dtype, device=q.device)
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
        q.stride(1) if rope is None else D,
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
        *(rope.args() if rope is not None else (ctx_lens,) * 6 + (0.0, 0)),
        GROUP=H // KV,
        GROUP_PAD=max(16, triton.next_power_of_2(H // KV)),
        BLOCK=BS,
        D=D,
        SPLITS=splits,
        MERGE_HERE=merge_here,
        PDL=pdl,
        ROPE_IN=rope is not None,
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


def reference(q, k_cache, v_cache, block_tables, ctx_lens, rope: QkRope | None = None):
    """paged_decode's computation in plain torch; with `rope`, reference_rope's."""
    if rope is not None:
        return reference_rope(q, k_cache, v_cache, block_tables, ctx_lens, rope)
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


def reference_rope(qkv, k_cache, v_cache, block_tables, ctx_lens, rope: QkRope) -> torch.Tensor:
    """The unfused step: q/k-norm + RoPE storing the new K/V at their slots
    (ref_qk_norm_rope), then the attention over the pool."""
    _, _, KV, D = k_cache.shape
    dest = KvDestination(k_cache.flatten(0, 1), v_cache.flatten(0, 1), rope.slots)
    heads = qkv.shape[1] // D - 2 * KV
    q, _, _ = ref_qk_norm_rope(
        qkv, rope.w_q, rope.w_k, rope.cos, rope.sin, rope.positions, heads, KV, rope.eps, dest
    )
    return reference(q, k_cache, v_cache, block_tables, ctx_lens)


def rope_self_check(
    device: torch.device,
    dtype: torch.dtype,
    shape: tuple[int, int, int],
    block_size: int,
    pdl: bool = False,
    tol: float = 1e-2,
) -> str | None:
    """paged_decode with `rope` run on this device as the engine launches it (`pdl`, one split and
    several with the arrival counters) against reference_rope, at the model's (heads, kv_heads,
    head_dim) `shape` and the pool's `block_size`: three sequences of 1, 2 blocks + 5 and 3 blocks
    of context at scattered blocks. None when the outputs and the stored K/V agree, else why."""
    H, KV, D = shape
    g = torch.Generator(device=device).manual_seed(0)
    rnd = lambda *s: torch.randn(*s, device=device, generator=g)  # noqa: E731
    nb, BS = 16, block_size
    lens = torch.tensor([1, 2 * BS + 5, 3 * BS], dtype=torch.int32, device=device)
    tables = torch.randperm(nb, device=device, generator=g)[:12].view(3, 4).to(torch.int32)
    pos = (lens - 1).long()
    slots = tables.gather(1, (pos // BS)[:, None]).long()[:, 0] * BS + pos % BS
    ang = torch.rand(4 * BS, D, device=device, generator=g) * 6.28
    rope = QkRope(rnd(D).to(dtype), rnd(D).to(dtype), ang.cos(), ang.sin(), pos, slots, 1e-6)
    qkv = (rnd(3, (H + 2 * KV) * D) * 3).to(dtype)
    pool = rnd(2, nb, BS, KV, D).to(dtype)
    want = pool.clone()
    ref = reference_rope(qkv, want[0], want[1], tables, lens, rope)
    counters = torch.zeros(3 * KV, dtype=torch.int32, device=device)
    try:
        for splits in (1, 4):
            got = pool.clone()
            out = paged_decode(qkv, got[0], got[1], tables, lens, splits, None, counters, pdl, rope)
            rows = got.view(2, -1, KV, D)[:, slots], want.view(2, -1, KV, D)[:, slots]
            got.view(2, -1, KV, D)[:, slots] = want.view(2, -1, KV, D)[:, slots]
            if not (agrees(out, ref, tol) and agrees(*rows, tol) and torch.equal(got, want)):
                return f"decode attention with q/k-norm + RoPE inside disagrees ({splits} splits)"
    except Exception as e:  # noqa: BLE001 - this build cannot compile or run the kernel
        return f"{type(e).__name__}: {e}"
    return None
