"""Event delivery from the engine thread to a Task caller.

Per asyncio loop one `Mailbox`: the engine thread drops its items (engine.outputs) into it, and the
loop is woken at most once per engine step however many requests the step served. Per request one
`Delivery`: the items waiting for that request's consumer, who is woken at most once per flush and
takes them all at once, so one engine step makes one event per request (no per-token queue hop). A
`Collector` turns a batch of items into one TokenEvent (one incremental decode of only the new
tokens) and the FinalEvent.

The mailbox also watches the engine while requests are open: once the Task reports it cannot serve
(its engine thread died), every open request gets an `error` final at once instead of waiting
forever.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Callable

from ..api.events import FinalEvent, TokenEvent
from ..engine.interface import SequenceView
from ..engine.outputs import EngineItem, Final, Tokens
from .detok import IncrementalDecoder
from .reasoning import ThinkSplit

WATCH_INTERVAL_S = 0.25


class Delivery:
    """One request's pending engine items; its consumer awaits `take()`."""

    __slots__ = ("items", "waiter", "closed")

    def __init__(self):
        self.items: list[EngineItem] = []
        self.waiter: asyncio.Future | None = None
        self.closed = False

    def _push(self, item: EngineItem) -> None:  # loop thread
        self.items.append(item)
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def take(self) -> list[EngineItem]:
        while not self.items:
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        items, self.items = self.items, []
        return items


class Mailbox:
    """Carries engine items into one asyncio loop with at most one wake-up per engine step."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, health: Callable[[], str | None] = lambda: None
    ):
        """Made on `loop`'s own thread."""
        self.loop, self.health = loop, health
        self.loop_thread = threading.get_ident()
        self.items: collections.deque = collections.deque()
        self.lock, self.scheduled = threading.Lock(), False
        self.open: set[Delivery] = set()
        self._watch: asyncio.TimerHandle | None = None

    # ---- engine thread (or the loop's own, where it reads the engine's messages) ------------
    def put(self, delivery: Delivery, item: EngineItem) -> None:
        if (
            threading.get_ident() == self.loop_thread
        ):  # on the loop already: straight to the consumer, in order
            self._drain()
            delivery._push(item)
            return
        self.items.append((delivery, item))
        with self.lock:
            if self.scheduled:
                return
            self.scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._flush)
        except RuntimeError:  # the loop is closed: nobody is listening
            pass

    # ---- loop thread -----------------------------------------------------------------------------
    def _flush(self) -> None:
        with self.lock:
            self.scheduled = False
        self._drain()

    def _drain(self) -> None:
        items = self.items
        while items:
            d, item = items.popleft()
            d._push(item)

    def open_delivery(self) -> Delivery:
        d = Delivery()
        self.open.add(d)
        if self._watch is None:
            self._watch = self.loop.call_later(WATCH_INTERVAL_S, self._check)
        return d

    def close_delivery(self, d: Delivery) -> None:
        d.closed = True
        self.open.discard(d)

    def _check(self) -> None:
        self._watch = None
        if not self.open:
            return
        reason = self.health()
        if reason is not None:
            self.fail_open(reason)
        self._watch = self.loop.call_later(WATCH_INTERVAL_S, self._check)

    def fail_open(self, reason: str) -> None:
        """End every open request with an error final (the engine will send nothing more)."""
        for d in list(self.open):
            if not any(isinstance(it, Final) for it in d.items):
                d._push(Final("error", f"engine failed: {reason}"))


class TaskStream:
    """One submitted request's events, for its consumer: TokenEvents (at most one per engine
    step), then one FinalEvent. The request is in the engine from the moment this exists, so a
    caller may do other work (build and send a stream's head) while the engine prefills.
    `aclose()` (idempotent, also at the end) closes the delivery and cancels the request if the
    engine is still on it, whether or not the stream was ever iterated."""

    def __init__(
        self,
        mailbox: Mailbox,
        box: Delivery,
        seq: SequenceView,
        collector: Collector,
        cancel: Callable[[str], None],
    ):
        self.mailbox, self.box, self.seq, self.out, self._cancel = (
            mailbox,
            box,
            seq,
            collector,
            cancel,
        )
        self._ready: collections.deque = collections.deque()
        self._closed = False

    def __aiter__(self) -> TaskStream:
        return self

    async def __anext__(self) -> TokenEvent | FinalEvent:
        while not self._ready:
            if self._closed:
                raise StopAsyncIteration
            self._ready.extend(self.out.handle_many(await self.box.take()))
        ev = self._ready.popleft()
        if isinstance(ev, FinalEvent):
            self._close()
        return ev

    def pending(self) -> bool:
        """Whether the next event is already here (the step that gave the last one gave it too, or a
        later step has come): a consumer may hold what it has and send both in one write."""
        return bool(self._ready) or (bool(self.box.items) and not self._closed)

    async def aclose(self) -> None:
        self._close()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.mailbox.close_delivery(self.box)
        if not self.seq.done:
            self._cancel(self.seq.req.request_id)


class Collector:
    """Turns the engine's items into TokenEvent / FinalEvent with incremental text. With thinking
    on (`end_id`: the family's end-think token) the text is split into reasoning and answer
    (ThinkSplit)."""

    def __init__(self, tokenizer, seq: SequenceView, end_id: int | None = None):
        self.seq, self.decoder, self.parts = seq, IncrementalDecoder(tokenizer), []
        self.final: FinalEvent | None = None
        self.split = (
            ThinkSplit(tokenizer, end_id)
            if seq.req.thinking is not None and end_id is not None
            else None
        )

    def handle_many(self, items: list[EngineItem]) -> list[TokenEvent | FinalEvent]:
        """Merge the token items into one event (one decode), keep the final last; nothing after
        it."""
        if self.final is not None:
            return []
        toks = [t for it in items if isinstance(it, Tokens) for t in it.ids]
        events = [self.handle(Tokens(toks))] if toks else []
        fin = next((it for it in items if isinstance(it, Final)), None)
        return events + [self.handle(fin)] if fin is not None else events

    def handle(self, item: EngineItem) -> TokenEvent | FinalEvent:
        rid = self.seq.req.request_id
        if isinstance(item, Tokens):
            if self.split is not None:
                reasoning, text = self.split.push(item.ids)
                return TokenEvent(rid, item.ids, text, reasoning, self.split.open)
            text = self.decoder.push(item.ids)
            self.parts.append(text)
            return TokenEvent(rid, item.ids, text)
        timing = self.seq.timing
        if timing.finished_ns is None:  # ended here, not by the engine (it died)
            timing.finished_ns = time.time_ns()
        if self.split is not None:
            return self._final_thinking(item)
        tail = self.decoder.flush()
        self.parts.append(tail)
        self.final = FinalEvent(
            rid,
            item.reason,
            len(self.seq.req.prompt_token_ids),
            len(self.seq.out),
            "".join(self.parts),
            list(self.seq.out),
            timing,
            item.error,
            tail,
        )
        return self.final

    def _final_thinking(self, item: Final) -> FinalEvent:
        split = self.split
        reasoning_tail, tail = split.flush()
        self.final = FinalEvent(
            self.seq.req.request_id,
            item.reason,
            len(self.seq.req.prompt_token_ids),
            len(self.seq.out),
            split.answer_text,
            list(self.seq.out),
            self.seq.timing,
            item.error,
            tail,
            split.reasoning_text,
            split.reasoning_tokens,
            reasoning_tail,
            not split.open,
        )
        return self.final
