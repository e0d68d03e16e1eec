"""The loop's batch tokenizer: prompts awaited together are encoded in one `encode_batch` call, with the
ids each would get alone; a lone prompt is encoded at once; an error reaches every waiter of its batch
and a cancelled waiter does not hold up the others."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from qualflow.runtime import BatchEncoder

TEXTS = [f"<|im_start|>user\nPrompt number {i}: " + "word " * (3 * i) + "<|im_end|>\n" for i in range(12)]


@pytest.fixture(scope="module")
def tokenizer(bundle_dir):
    return Tokenizer.from_file(str(Path(bundle_dir) / "tokenizer.json"))


def test_a_burst_is_one_call_with_each_prompts_own_ids(tokenizer):
    async def burst():
        enc = BatchEncoder(tokenizer)
        try:
            first = await enc.encode(TEXTS[0])          # alone: a batch of its own
            ids = await asyncio.gather(*(enc.encode(t) for t in TEXTS))
            return enc.batches, first, ids
        finally:
            enc.close()

    batches, first, ids = asyncio.run(burst())
    alone = [tokenizer.encode(t, add_special_tokens=False).ids for t in TEXTS]
    assert first == alone[0]
    assert ids == alone
    assert batches == 2, batches   # the lone prompt, then the twelve awaited together


def test_prompts_arriving_during_a_batch_form_the_next(tokenizer):
    async def staggered():
        enc = BatchEncoder(tokenizer)
        try:
            a = asyncio.ensure_future(enc.encode(TEXTS[1]))
            while enc.batches < 1:                    # until the first batch is in the tokenizer's thread
                await asyncio.sleep(0)
            rest = [asyncio.ensure_future(enc.encode(t)) for t in TEXTS[2:6]]
            got = await asyncio.gather(a, *rest)
            return enc.batches, got
        finally:
            enc.close()

    batches, got = asyncio.run(staggered())
    assert got == [tokenizer.encode(t, add_special_tokens=False).ids for t in TEXTS[1:6]]
    assert batches == 2, batches


class _Broken:
    def encode_batch(self, texts, add_special_tokens):
        raise RuntimeError("tokenizer broke")


def test_an_error_reaches_every_waiter_and_the_encoder_goes_on(tokenizer):
    async def run():
        enc = BatchEncoder(_Broken())
        try:
            outs = await asyncio.gather(*(enc.encode(t) for t in TEXTS[:3]), return_exceptions=True)
        finally:
            enc.close()
        good = BatchEncoder(tokenizer)
        try:
            cancelled = asyncio.ensure_future(good.encode(TEXTS[3]))
            kept = asyncio.ensure_future(good.encode(TEXTS[4]))
            await asyncio.sleep(0)
            cancelled.cancel()
            return outs, await kept, await good.encode(TEXTS[5])
        finally:
            good.close()

    outs, kept, after = asyncio.run(run())
    assert [type(o) for o in outs] == [RuntimeError] * 3 and "tokenizer broke" in str(outs[0])
    assert kept == tokenizer.encode(TEXTS[4], add_special_tokens=False).ids
    assert after == tokenizer.encode(TEXTS[5], add_special_tokens=False).ids


def test_only_text_is_accepted(tokenizer):
    async def run():
        enc = BatchEncoder(tokenizer)
        try:
            await enc.encode([1, 2, 3])
        finally:
            enc.close()

    with pytest.raises(TypeError, match="expected text, got list"):
        asyncio.run(run())
