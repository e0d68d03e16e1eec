"""The PieceEncoder (ASCII split in `re` + cached per-piece BPE) gives the tokenizer's own ids,
on text built to hit every alternative of the pre-tokenizer pattern and their boundaries, and the
Task's prompt encoder takes it only where it applies."""

import random

import pytest
from tokenizers import Tokenizer, pre_tokenizers

from qualflow.runtime.frontend import pieces as pieces_mod
from qualflow.runtime.frontend.pieces import piece_encoder
from qualflow.runtime.frontend.tokenizing import GilFreeEncoder, PieceEncoding

ALPHABET = (
    "abcdestvmlrSTVMLRDEZz09 7  \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x00\x7f"
    "'''.,!?-_()[]{}<>|/\\\"#$%&*+:;=@^`~"
    "\n\n  \r\n"
)
SNIPPETS = (
    "'s",
    "'S",
    "'ll",
    "'LL",
    "'Re",
    "'ve",
    "'m",
    "'d",
    "'t",
    "''s",
    " 's",
    "don't",
    "I'M",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<|im_start|",
    "<|endoftext|>",
    "<tool_call>",
    "   \n",
    " \n ",
    "\n\n\n",
    "    x",
    "1234",
    " 12a",
    "a1b2",
    "...",
    " !!\n",
    "\r\n\r\n",
    "\t\t ",
    "hello",
    " World",
)


@pytest.fixture(scope="module")
def tok(bundle_dir):
    return Tokenizer.from_file(str(bundle_dir / "tokenizer.json"))


def _texts(n: int, seed: int = 0) -> list[str]:
    rng, out = random.Random(seed), []
    for _ in range(n):
        parts = [
            rng.choice(SNIPPETS) if rng.random() < 0.3 else rng.choice(ALPHABET)
            for _ in range(rng.randint(1, 60))
        ]
        out.append("".join(parts))
    return out


def test_ids_equal_the_tokenizers_on_adversarial_ascii(tok):
    enc = piece_encoder(tok)
    assert enc is not None
    texts = [chr(a) for a in range(128)] + [
        chr(a) + chr(b) for a in range(128) for b in range(0, 128, 3)
    ]
    texts += _texts(4000)
    for t in texts:
        assert enc.ids(t) == tok.encode(t, add_special_tokens=False).ids, repr(t)


def test_ids_equal_on_a_rendered_chat_prompt_cold_and_warm(tok):
    enc = piece_encoder(tok)
    text = (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n"
        "From fairest creatures we desire increase,\n"
        "That thereby beauty's rose might never die;  \n\n 1609 -- W.S.<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    want = tok.encode(text, add_special_tokens=False).ids
    assert enc.ids(text) == want  # every piece a miss
    assert enc.ids(text) == want  # every piece cached


def test_a_full_cache_stops_growing_and_stays_exact(tok, monkeypatch):
    monkeypatch.setattr(pieces_mod, "MAX_ENTRIES", 8)
    enc = piece_encoder(tok)
    for t in _texts(50, seed=1):
        assert enc.ids(t) == tok.encode(t, add_special_tokens=False).ids, repr(t)
    assert len(enc._cache) == 8


def test_another_pre_tokenizer_gets_no_piece_encoder(tok):
    other = Tokenizer.from_str(tok.to_str())
    other.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    assert piece_encoder(other) is None


def test_prompt_encoder_takes_pieces_for_ascii_only(tok):
    enc = GilFreeEncoder(tok, pieces=piece_encoder(tok))
    ascii_text, other = (
        "A plain prompt, it's ASCII.",
        "Un caf\u00e9 cr\u00e8me \u2014 s'il vous pla\u00eet",
    )
    fast = enc.encode(ascii_text, add_special_tokens=False)
    assert isinstance(fast, PieceEncoding)
    assert fast.ids == tok.encode(ascii_text, add_special_tokens=False).ids
    assert (
        fast.tokens == tok.encode(ascii_text, add_special_tokens=False).tokens
    )  # the rest: the tokenizer's
    assert not isinstance(enc.encode(other, add_special_tokens=False), PieceEncoding)
    assert not isinstance(
        enc.encode(ascii_text), PieceEncoding
    )  # special-token additions: the tokenizer's
    assert (
        enc.encode(other, add_special_tokens=False).ids
        == tok.encode(other, add_special_tokens=False).ids
    )
