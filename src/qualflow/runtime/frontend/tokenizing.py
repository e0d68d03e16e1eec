"""Prompt tokenization that lets other threads run: `tokenizers` releases the GIL in `encode_batch`
only, so a 1 MB prompt tokenized with `encode` would stall the server's event loop and the engine
thread for the whole encode (measured ~0.6 s per MB on a 2-core box)."""
from __future__ import annotations


class GilFreeEncoder:
    """A tokenizers.Tokenizer whose `encode` runs as a batch of one (same result, GIL released)."""

    def __init__(self, tokenizer):
        self._tok = tokenizer

    def encode(self, text, *args, **kwargs):
        if not isinstance(text, str):
            raise TypeError(f"expected text, got {type(text).__name__}")
        return self._tok.encode_batch([text], *args, **kwargs)[0]

    def __getattr__(self, name):
        return getattr(self._tok, name)
