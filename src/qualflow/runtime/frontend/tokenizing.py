"""Prompt tokenization that lets other threads run. `tokenizers` releases the GIL in `encode_batch`
only, so a 1 MB prompt tokenized with `encode` would stall the server's event loop and the engine
thread for the whole encode (measured ~0.6 s per MB on a 2-core box).

`BatchEncoder` is the event loop's tokenizer: the prompts that arrive while one batch is being
encoded are encoded together in the next `encode_batch` call, on one thread of its own, which the
tokenizers library spreads over the machine's cores. A lone request is encoded alone, at once; a
burst of requests (a wave of a concurrency point) costs one parallel call instead of one encode after
another on the loop."""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor


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


class BatchEncoder:
    """`await encode(text)`: the text's token ids (no special tokens added), with the texts awaited
    meanwhile encoded in the same `encode_batch` call. Used from one event loop."""

    def __init__(self, tokenizer):
        self._tok = tokenizer
        self._pending: list[tuple[str, asyncio.Future]] = []
        self._draining = False
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="qualflow-tokenize")
        self.batches = 0    # encode_batch calls made (for tests and profiles)

    async def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"expected text, got {type(text).__name__}")
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pending.append((text, fut))
        if not self._draining:
            self._draining = True
            loop.create_task(self._drain())   # runs after the loop's ready callbacks: they join the batch
        return await fut

    def _encode(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(texts, add_special_tokens=False)]

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                self.batches += 1
                try:
                    ids = await loop.run_in_executor(self._thread, self._encode, [t for t, _ in batch])
                except Exception as e:   # every waiter of the batch gets the error
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(e)
                    continue
                for (_, fut), one in zip(batch, ids):
                    if not fut.done():   # a waiter that was cancelled is skipped
                        fut.set_result(one)
        finally:
            self._draining = False

    def close(self) -> None:
        self._thread.shutdown(wait=False)
