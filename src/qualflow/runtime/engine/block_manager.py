"""The paged KV cache's bookkeeping: fixed-size blocks drawn from one pool, a block table per
sequence, and the prefix cache over them. Allocation and freeing move block ids between free lists
and tables; no K/V is copied. Block 0 is reserved as scratch (the padding rows of a captured decode
step write there).

Prefix cache (on unless `caching=False`): a full block whose K/V a launched step has computed is
registered under a chained hash of its tokens, `block_hash(parent's hash, tokens)`; a sequence
admitted later whose own chain of hashes finds it takes it into its block table (reference count
+1) instead of computing those tokens again. What else the K/V of a block depends on is the same
for every block of one engine (the weights, the dtype; the position is the chain), so the tokens
and the chain are the whole key today. A hit is checked against the block's stored parent hash
and tokens, so a hash collision misses instead of serving another prefix's K/V. Only full blocks
are cached, and a sequence never takes the block that holds its last token (its logits are
needed), so a shared block is never written.

A block whose count falls to 0 stays registered, in `evictable`, least recently freed first (a
sequence's blocks are freed last block first, so its prefix outlives its tail); allocation takes
never-registered free blocks first, then evicts the least recently freed. All of it is host work
done while the scheduler builds a step: nothing here waits for the device."""

from __future__ import annotations

import hashlib
from collections import OrderedDict, deque

import numpy as np

from .sequence import PLACEHOLDER, Sequence

RESERVED_BLOCKS = 1


def block_hash(parent: int, tokens: list[int] | np.ndarray) -> int:
    """The chained key of a full block: its parent's key (0 for the first block) and its tokens."""
    data = parent.to_bytes(16, "little") + np.asarray(tokens, np.int64).tobytes()
    return int.from_bytes(hashlib.blake2b(data, digest_size=16).digest(), "little")


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, caching: bool = True):
        if num_blocks <= RESERVED_BLOCKS:
            raise ValueError(
                f"the KV pool needs more than {RESERVED_BLOCKS} blocks, got {num_blocks}"
            )
        self.num_blocks, self.block_size, self.caching = num_blocks, block_size, caching
        self.free: deque[int] = deque(range(RESERVED_BLOCKS, num_blocks))  # never registered
        self.refs = [0] * num_blocks
        self.cached: dict[int, int] = {}  # chained hash -> block
        self.keys: dict[int, tuple[int, int, tuple[int, ...]]] = {}  # block -> (hash, parent, toks)
        self.evictable: OrderedDict[int, None] = OrderedDict()  # registered, count 0; LRU first
        self.hit_blocks = 0  # blocks taken from the cache at admission, over the engine's life
        self.num_evicted = 0  # cached blocks given to new contents

    @property
    def num_free(self) -> int:  # blocks allocation can take (cached ones with no user included)
        return len(self.free) + len(self.evictable)

    @property
    def capacity(self) -> int:  # blocks a sequence can ever hold
        return self.num_blocks - RESERVED_BLOCKS

    def needed(self, seq: Sequence, num_tokens: int) -> int:
        """Blocks to add so that `seq` can hold its first `num_tokens` tokens."""
        return max(0, -(-num_tokens // self.block_size) - len(seq.block_table))

    def can_allocate(self, n: int, reserve: int = 0) -> bool:
        return n + reserve <= self.num_free

    def allocate(self, seq: Sequence, num_tokens: int) -> None:
        for _ in range(self.needed(seq, num_tokens)):
            b = self.free.popleft() if self.free else self._evict()
            self.refs[b] = 1
            seq.block_table.append(b)

    def _evict(self) -> int:
        b, _ = self.evictable.popitem(last=False)
        self.num_evicted += 1
        h = self.keys.pop(b)[0]
        del self.cached[h]
        return b

    # ---- the prefix cache ---------------------------------------------------------------------
    def _hashes(self, seq: Sequence, num_tokens: int) -> list[int]:
        """`seq.block_hashes`, extended over the full blocks of its first `num_tokens` tokens."""
        bs, hashes = self.block_size, seq.block_hashes
        first, last = len(hashes), num_tokens // bs
        if last <= first:
            return hashes
        # one conversion for all the new blocks (per block, a list slice to an array cost ~6 us)
        toks = np.asarray(seq.token_ids[first * bs : last * bs], np.int64)
        for i in range(last - first):
            hashes.append(block_hash(hashes[-1] if hashes else 0, toks[i * bs : i * bs + bs]))
        return hashes

    def match(self, seq: Sequence) -> list[int]:
        """The cached blocks that hold a prefix of `seq`'s tokens (never the block of its last
        token), for a sequence that holds no block yet."""
        if not self.caching or seq.block_table:
            return []
        hashes = self._hashes(seq, len(seq.token_ids) - 1)
        hits, parent, bs = [], 0, self.block_size
        for i, h in enumerate(hashes):
            b = self.cached.get(h)
            if b is None:
                break
            _, p, toks = self.keys[b]
            if p != parent or toks != tuple(seq.token_ids[i * bs : i * bs + bs]):
                break  # a collision: another prefix's block under this key
            hits.append(b)
            parent = h
        return hits

    def hit_cost(self, hits: list[int]) -> int:
        """Free blocks that taking `hits` uses up (those nobody holds now)."""
        return sum(1 for b in hits if self.refs[b] == 0)

    def take(self, seq: Sequence, hits: list[int]) -> None:
        """Put the cached blocks `hits` (match) at the start of `seq`'s table: their tokens count
        as computed."""
        for b in hits:
            if self.refs[b] == 0:
                del self.evictable[b]
            self.refs[b] += 1
        self.hit_blocks += len(hits)
        seq.block_table = list(hits)
        seq.num_computed = len(hits) * self.block_size
        seq.num_committed = len(hits)

    def commit(self, seq: Sequence) -> None:
        """Register the full blocks of `seq` whose K/V launched steps computed (its tokens up to
        num_computed, none of them still a placeholder)."""
        if not self.caching:
            return
        n = min(seq.num_computed, len(seq.token_ids), len(seq.block_table) * self.block_size)
        while n and seq.token_ids[n - 1] == PLACEHOLDER:  # only a last token or two can be one
            n -= 1
        bs, start = self.block_size, seq.num_committed
        if n // bs <= start:
            return
        hashes = self._hashes(seq, n)
        for i in range(start, n // bs):
            b, h = seq.block_table[i], hashes[i]
            if h not in self.cached and b not in self.keys:  # else: the same block, or a twin
                self.cached[h] = b
                toks = tuple(seq.token_ids[i * bs : i * bs + bs])
                self.keys[b] = (h, hashes[i - 1] if i else 0, toks)
        seq.num_committed = n // bs

    def release(self, seq: Sequence, keep: bool = True) -> None:
        """Drop `seq`'s hold on its blocks, last first. With `keep`, its computed full blocks stay
        cached (evictable once nobody holds them); without it (its K/V may be wrong: a failed
        step) the blocks it alone held leave the cache."""
        if keep:
            self.commit(seq)
        for b in reversed(seq.block_table):
            self.refs[b] -= 1
            if self.refs[b]:
                continue
            if b in self.keys and not keep:
                del self.cached[self.keys.pop(b)[0]]
            if b in self.keys:
                self.evictable[b] = None
            else:
                self.free.append(b)
        seq.block_table, seq.num_committed = [], 0
