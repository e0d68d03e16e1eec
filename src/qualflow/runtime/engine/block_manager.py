"""The paged KV cache's bookkeeping: fixed-size blocks drawn from one pool, a block table per
sequence. Allocation and freeing move block ids between a free list and tables; no K/V is copied.
Block 0 is reserved as scratch (the padding rows of a captured decode step write there)."""

from __future__ import annotations

from collections import deque

from .sequence import Sequence

RESERVED_BLOCKS = 1


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int):
        if num_blocks <= RESERVED_BLOCKS:
            raise ValueError(
                f"the KV pool needs more than {RESERVED_BLOCKS} blocks, got {num_blocks}"
            )
        self.num_blocks, self.block_size = num_blocks, block_size
        self.free: deque[int] = deque(range(RESERVED_BLOCKS, num_blocks))

    @property
    def num_free(self) -> int:
        return len(self.free)

    @property
    def capacity(self) -> int:  # blocks a sequence can ever hold
        return self.num_blocks - RESERVED_BLOCKS

    def needed(self, seq: Sequence, num_tokens: int) -> int:
        """Blocks to add so that `seq` can hold its first `num_tokens` tokens."""
        return max(0, -(-num_tokens // self.block_size) - len(seq.block_table))

    def can_allocate(self, n: int, reserve: int = 0) -> bool:
        return n + reserve <= len(self.free)

    def allocate(self, seq: Sequence, num_tokens: int) -> None:
        for _ in range(self.needed(seq, num_tokens)):
            seq.block_table.append(self.free.popleft())

    def release(self, seq: Sequence) -> None:
        self.free.extend(seq.block_table)
        seq.block_table = []
