"""Event delivery from the engine thread to a Task caller: a mailbox per asyncio loop (at most one
wake-up per engine step) and a collector that turns raw engine items into Token/Final events with
incremental text."""
from __future__ import annotations

import asyncio
import collections
import threading

from .detok import IncrementalDecoder
from .engine import Seq
from .events import FinalEvent, TokenEvent


class Mailbox:
    """Carries engine items into one asyncio loop with at most one wake-up per engine step, however
    many requests the step served (a wake-up per token would cost the loop more than the model)."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop, self.items, self.lock, self.scheduled = loop, collections.deque(), threading.Lock(), False

    def put(self, inbox: asyncio.Queue, item: tuple) -> None:  # engine thread
        self.items.append((inbox, item))
        with self.lock:
            if self.scheduled:
                return
            self.scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._flush)
        except RuntimeError:  # the loop is closed: nobody is listening
            pass

    def _flush(self) -> None:  # event loop thread
        with self.lock:
            self.scheduled = False
        while self.items:
            inbox, item = self.items.popleft()
            inbox.put_nowait(item)


class Collector:
    """Turns the engine's raw items into TokenEvent / FinalEvent with incremental text."""

    def __init__(self, tokenizer, seq: Seq):
        self.seq, self.decoder, self.parts = seq, IncrementalDecoder(tokenizer), []

    def handle_many(self, items: list[tuple]) -> list[TokenEvent | FinalEvent]:
        """Merge consecutive token items into one event (one decode), keep the final last."""
        toks = [t for it in items if it[0] == "tokens" for t in it[1]]
        events = [self.handle(("tokens", toks))] if toks else []
        return events + [self.handle(it) for it in items if it[0] == "final"]

    def handle(self, item: tuple) -> TokenEvent | FinalEvent | None:
        rid = self.seq.req.request_id
        if item[0] == "tokens":
            text = self.decoder.push(item[1])
            self.parts.append(text)
            return TokenEvent(rid, item[1], text)
        _, reason, error = item
        tail = self.decoder.flush()
        self.parts.append(tail)
        return FinalEvent(rid, reason, len(self.seq.req.prompt_token_ids), len(self.seq.out),
                          "".join(self.parts), list(self.seq.out), self.seq.timing, error, tail)
