"""Prompt tokenization that keeps the event loop's share small: `tokenizers` releases the GIL in
`encode_batch` only, so a 1 MB prompt tokenized with `encode` would stall the server's event loop
and the engine thread for the whole encode. A batch of one costs more than `encode` for a
chat-sized prompt (the thread pool's hand-off), so text below `GIL_FREE_CHARS` is encoded
directly: by the tokenizer's PieceEncoder where it has one and the text is ASCII (the same ids,
in less time on a warm cache), else by `encode`."""

from __future__ import annotations

from .pieces import PieceEncoder

GIL_FREE_CHARS = 16 << 10


class PieceEncoding:
    """What `encode` returns on the PieceEncoder's path: `ids`; anything else an Encoding has
    comes from the tokenizer's own encode of the text, made on first use."""

    __slots__ = ("ids", "_text", "_tok", "_full")

    def __init__(self, ids: list[int], text: str, tokenizer):
        self.ids, self._text, self._tok, self._full = ids, text, tokenizer, None

    def __len__(self) -> int:
        return len(self.ids)

    def __getattr__(self, name):
        if self._full is None:
            self._full = self._tok.encode(self._text, add_special_tokens=False)
        return getattr(self._full, name)


class GilFreeEncoder:
    """A tokenizers.Tokenizer whose `encode` of a long text runs as a batch of one (same result, GIL
    released); a short text is encoded directly, an ASCII one without special-token additions by
    `pieces` where given."""

    def __init__(
        self, tokenizer, gil_free_chars: int = GIL_FREE_CHARS, pieces: PieceEncoder | None = None
    ):
        self._tok, self._long, self._pieces = tokenizer, gil_free_chars, pieces

    def encode(self, text, *args, **kwargs):
        if not isinstance(text, str):
            raise TypeError(f"expected text, got {type(text).__name__}")
        if len(text) < self._long:
            if (
                self._pieces is not None
                and not args
                and kwargs == {"add_special_tokens": False}
                and text.isascii()
            ):
                return PieceEncoding(self._pieces.ids(text), text, self._tok)
            return self._tok.encode(text, *args, **kwargs)
        return self._tok.encode_batch([text], *args, **kwargs)[0]

    def __getattr__(self, name):
        return getattr(self._tok, name)
