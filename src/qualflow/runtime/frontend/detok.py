"""Incremental detokenization that never splits a multi-byte character across deltas."""

from __future__ import annotations


class IncrementalDecoder:
    """Decodes a growing token list. `push` returns only text that is final: a window that ends in
    an incomplete UTF-8 sequence (U+FFFD) is held back until the next tokens complete it."""

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.ids: list[int] = []
        self.prefix = 0  # start of the context window re-decoded for each delta
        self.read = 0  # end of what has been emitted

    def _decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=True)

    def push(self, new_ids: list[int]) -> str:
        self.ids.extend(new_ids)
        before = self._decode(self.ids[self.prefix : self.read])
        after = self._decode(self.ids[self.prefix :])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            self.prefix, self.read = self.read, len(self.ids)
            return after[len(before) :]
        return ""

    def flush(self) -> str:
        """At the end: whatever is still held back, replacement characters included."""
        before = self._decode(self.ids[self.prefix : self.read])
        after = self._decode(self.ids[self.prefix :])
        self.prefix = self.read = len(self.ids)
        return after[len(before) :]
