"""Prompt tokenization: a chat-sized text is encoded directly (a batch of one costs the thread
pool's hand-off), a long one as a batch of one with the GIL released; both give the tokenizer's
own ids."""

from tokenizers import Tokenizer

from qualflow.runtime.frontend.tokenizing import GIL_FREE_CHARS, GilFreeEncoder


class Counting:
    """The real tokenizer, counting which entry point ran."""

    def __init__(self, tok):
        self.tok, self.calls = tok, []

    def encode(self, text, *a, **k):
        self.calls.append("encode")
        return self.tok.encode(text, *a, **k)

    def encode_batch(self, texts, *a, **k):
        self.calls.append("encode_batch")
        return self.tok.encode_batch(texts, *a, **k)


def test_short_text_is_encoded_directly_and_long_text_gil_free(bundle_dir):
    tok = Tokenizer.from_file(str(bundle_dir / "tokenizer.json"))
    spy = Counting(tok)
    enc = GilFreeEncoder(spy)
    short = "The model serves a chat prompt of a few hundred characters. " * 4
    long = "word " * (GIL_FREE_CHARS // 5 + 10)
    assert enc.encode(short).ids == tok.encode(short).ids
    assert enc.encode(long).ids == tok.encode(long).ids
    assert spy.calls == ["encode", "encode_batch"]
