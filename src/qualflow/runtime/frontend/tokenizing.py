"""Prompt tokenization that lets other threads run when it matters: `tokenizers` releases the GIL in
`encode_batch` only, so a 1 MB prompt tokenized with `encode` would stall the server's event loop and
the engine thread for the whole encode (measured ~0.6 s per MB on a 2-core box). A batch of one costs
more than `encode` for a chat-sized prompt (the thread pool's hand-off), so text below
`GIL_FREE_CHARS` is encoded directly: it holds the GIL for well under a millisecond."""
from __future__ import annotations

GIL_FREE_CHARS = 16 << 10


class GilFreeEncoder:
    """A tokenizers.Tokenizer whose `encode` of a long text runs as a batch of one (same result, GIL
    released); a short text is encoded directly."""

    def __init__(self, tokenizer, gil_free_chars: int = GIL_FREE_CHARS):
        self._tok, self._long = tokenizer, gil_free_chars

    def encode(self, text, *args, **kwargs):
        if not isinstance(text, str):
            raise TypeError(f"expected text, got {type(text).__name__}")
        if len(text) < self._long:
            return self._tok.encode(text, *args, **kwargs)
        return self._tok.encode_batch([text], *args, **kwargs)[0]

    def __getattr__(self, name):
        return getattr(self._tok, name)
