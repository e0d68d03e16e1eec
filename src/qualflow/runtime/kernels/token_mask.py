"""A constrained step's token mask applied to its logits in one Triton kernel: for each of the
given rows, the tokens whose bit is clear in that row's bitmask (one bit a token, 32 to an int32
word, as llguidance writes them) get -inf. Only the masked logits are written; the rows without a
grammar are not touched. `reference` is the same in torch (CPU, and where Triton is missing); on a
GPU it takes five passes over a rows x vocab x 32 temporary, which cost a decode step at c64 about
0.1 ms."""

from __future__ import annotations

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the reference runs
    triton = None

BLOCK = 1024


if triton is not None:

    @triton.jit
    def _token_mask_kernel(L, M, ROWS, V, s_l, s_m, BLOCK: tl.constexpr):
        i = tl.program_id(0)
        row = tl.load(ROWS + i).to(tl.int64)
        c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        inside = c < V
        word = tl.load(M + i * s_m + c // 32, mask=inside, other=-1)
        clear = ((word >> (c % 32)) & 1) == 0
        tl.store(L + row * s_l + c, float("-inf"), mask=inside & clear)


def reference(logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor) -> None:
    """`logits[rows[i]]` masked by `bitmask[i]`, in place (any device)."""
    bits = torch.arange(32, device=logits.device, dtype=torch.int32)
    allowed = ((bitmask.unsqueeze(-1) >> bits) & 1).bool().flatten(1)[:, : logits.shape[-1]]
    rows = rows.long()
    logits[rows] = logits[rows].masked_fill(~allowed, float("-inf"))


def usable(logits: torch.Tensor) -> bool:
    """Whether the Triton kernel runs for these logits (a CUDA device and Triton)."""
    return triton is not None and logits.is_cuda and logits.stride(-1) == 1


def apply(logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor) -> None:
    """Mask `logits` (batch x vocab) in place: row `rows[i]` by `bitmask[i]` (int32, on the logits'
    device, contiguous); the Triton kernel where `usable`, else `reference`."""
    if not usable(logits):
        reference(logits, bitmask, rows)
        return
    k, vocab = rows.shape[0], logits.shape[-1]
    if k:
        grid = (k, triton.cdiv(vocab, BLOCK))
        _token_mask_kernel[grid](
            logits, bitmask, rows, vocab, logits.stride(0), bitmask.stride(0), BLOCK=BLOCK
        )
