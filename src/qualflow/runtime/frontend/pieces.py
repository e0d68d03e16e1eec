"""A faster exact encoder for ASCII text, for the byte-level BPE tokenizers of the Qwen2/Qwen3 kind.

`tokenizers` spends most of a chat prompt's encode in its Oniguruma pre-tokenizer split, with the
event loop blocked. For ASCII text the same split is a plain `re` pattern (the tokenizer's
classes \\p{L}, \\p{N}, \\s are [A-Za-z], [0-9], [\\t\\n\\v\\f\\r ] there, and its NFC normalizer
changes nothing), and BPE maps each piece on its own; so a text is split here and each piece's
ids come from a cache, the misses encoded by the tokenizer's own BPE model, piece by piece. Added
tokens are cut out first, longest first, as the tokenizer does. The ids are the tokenizer's own
(tests/runtime/test_pieces.py compares them on adversarial text); a tokenizer whose configuration
is not the one this mirrors gets no PieceEncoder (`piece_encoder` returns None)."""

from __future__ import annotations

import json
import re
from itertools import chain

_WS = r"\t\n\x0b\x0c\r "
# The tokenizer's pattern, and what it is on ASCII text: same alternatives, same order.
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)
ASCII_SPLIT = re.compile(
    rf"'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])|[^\r\nA-Za-z0-9]?[A-Za-z]+|"
    rf"[0-9]| ?[^{_WS}A-Za-z0-9]+[\r\n]*|[{_WS}]*[\r\n]+|[{_WS}]+(?![^{_WS}])|[{_WS}]+"
)
MAX_ENTRIES = 1 << 17  # pieces cached (~25 MB; then no more are added: none is ever evicted)
MAX_PIECE = 64  # characters; longer pieces are encoded each time


def _state(part) -> dict | None:
    return None if part is None else json.loads(part.__getstate__())


def _mirrored(tokenizer, added: list) -> bool:
    """Whether the tokenizer's configuration is the one ASCII_SPLIT + per-piece BPE reproduces."""
    pre, norm = _state(tokenizer.pre_tokenizer) or {}, _state(tokenizer.normalizer)
    steps = pre.get("pretokenizers") if pre.get("type") == "Sequence" else None
    model = tokenizer.model
    if not steps or len(steps) != 2 or type(model).__name__ != "BPE" or model.dropout is not None:
        return False
    split, byte_level = steps
    return (
        (norm is None or norm.get("type") in ("NFC", "NFKC"))
        and split.get("type") == "Split"
        and split.get("pattern") == {"Regex": QWEN_PATTERN}
        and split.get("behavior") == "Isolated"
        and not split.get("invert")
        and byte_level.get("type") == "ByteLevel"
        and not byte_level.get("add_prefix_space")
        and not byte_level.get("use_regex")
        and tokenizer.truncation is None
        and tokenizer.padding is None
        and not any(a.normalized or a.lstrip or a.rstrip or a.single_word for a in added)
    )


class PieceEncoder:
    """`ids(text)`: the tokenizer's ids of an ASCII `text` without special-token additions
    (encode(text, add_special_tokens=False).ids). Safe to share between threads."""

    def __init__(self, tokenizer, added: dict[int, str]):
        """`added`: the tokenizer's added tokens, id -> content."""
        from tokenizers import Tokenizer, pre_tokenizers

        self._tok = tokenizer
        self._added = {content: i for i, content in added.items()}
        longest = sorted(self._added, key=len, reverse=True)
        self._cut = re.compile("(" + "|".join(map(re.escape, longest)) + ")") if longest else None
        self._bpe = Tokenizer(tokenizer.model)  # the same model (shared), without the split and NFC
        self._bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        self._cache: dict[str, tuple[int, ...]] = {}

    def ids(self, text: str) -> list[int]:
        if self._cut is None:
            return self._segment(text)
        out: list[int] = []
        for i, part in enumerate(self._cut.split(text)):
            if i % 2:
                out.append(self._added[part])
            elif part:
                out += self._segment(part)
        return out

    def _segment(self, text: str) -> list[int]:
        pieces = ASCII_SPLIT.findall(text)
        if sum(map(len, pieces)) != len(
            text
        ):  # never on ASCII (every character starts a match): a guard
            return self._tok.encode(text, add_special_tokens=False).ids
        cache = self._cache
        try:
            return list(chain.from_iterable(map(cache.__getitem__, pieces)))
        except KeyError:
            pass
        missing = [p for p in dict.fromkeys(pieces) if p not in cache]
        encode = (
            self._bpe.encode
        )  # one by one on this thread: less CPU than a batch, no thread pool hand-off
        found = {
            p: tuple(encode(p, add_special_tokens=False).ids) for p in missing
        }  # tuples: untracked by gc
        if self._keep(found):
            return list(chain.from_iterable(map(cache.__getitem__, pieces)))
        get = found.get  # a piece's ids are never empty
        return list(chain.from_iterable([get(p) or cache[p] for p in pieces]))

    def _keep(self, found: dict[str, tuple[int, ...]]) -> bool:
        """Cache what fits (entries are never removed); whether all of `found` is cached now."""
        room = MAX_ENTRIES - len(self._cache)
        if room >= len(found) and all(len(p) <= MAX_PIECE for p in found):
            self._cache.update(found)
            return True
        if room > 0:
            self._cache.update([kv for kv in found.items() if len(kv[0]) <= MAX_PIECE][:room])
        return False


def piece_encoder(tokenizer) -> PieceEncoder | None:
    """A PieceEncoder for `tokenizer` (a tokenizers.Tokenizer), or None where its configuration
    differs."""
    try:
        added = tokenizer.get_added_tokens_decoder()
        if not _mirrored(tokenizer, list(added.values())):
            return None
    except (AttributeError, TypeError, ValueError):
        return None
    return PieceEncoder(tokenizer, {i: a.content for i, a in added.items()})
