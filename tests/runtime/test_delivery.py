"""A request's delivery from the engine to its consumer (runtime.frontend.delivery), without an
engine: the items of one step become one event, and `pending` tells the consumer that the next
one is here."""

from __future__ import annotations

import asyncio
import time

from qualflow.runtime import FinalEvent, GenerationRequest, SamplingParams, TaskTiming
from qualflow.runtime.engine.interface import SubmittedRequest
from qualflow.runtime.engine.outputs import Final, Tokens
from qualflow.runtime.frontend.delivery import Collector, Mailbox, TaskStream


class Chars:
    """A tokenizer whose ids are code points."""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(map(chr, ids))


def test_pending_is_true_only_while_the_next_event_is_already_delivered():
    cancelled: list = []

    async def go():
        mailbox = Mailbox(asyncio.get_running_loop())
        box = mailbox.open_delivery()
        seq = SubmittedRequest(
            GenerationRequest("r", [1], SamplingParams(max_new_tokens=3)),
            None,
            TaskTiming(time.time_ns()),
        )
        stream = TaskStream(mailbox, box, seq, Collector(Chars(), seq), cancelled.append)
        assert not stream.pending()
        mailbox.put(box, Tokens([97]))
        await asyncio.sleep(0)  # the loop's flush
        assert stream.pending()
        first = await stream.__anext__()
        assert first.text == "a" and not stream.pending()
        seq.out, seq.done = [97, 98, 99], True
        for item in (
            Tokens([98]),
            Tokens([99]),
            Final("length"),
        ):  # one step: its last tokens and the final
            mailbox.put(box, item)
        await asyncio.sleep(0)
        last = await stream.__anext__()
        assert last.text == "bc" and stream.pending()
        fin = await stream.__anext__()
        assert isinstance(fin, FinalEvent) and fin.text == "abc" and not stream.pending()
        mailbox.put(box, Tokens([100]))  # nothing comes after the final
        await asyncio.sleep(0)
        assert not stream.pending()

    asyncio.run(go())
    assert cancelled == []


def test_a_put_on_the_loop_thread_reaches_the_consumer_at_once_and_after_earlier_ones():
    """Where the loop itself reads the engine's messages (process.reading), an item put on its
    thread is in its delivery when `put` returns (no extra loop iteration before the consumer
    wakes), after any item another thread put before it."""
    import threading

    async def go():
        mailbox = Mailbox(asyncio.get_running_loop())
        box = mailbox.open_delivery()
        waiter = asyncio.ensure_future(box.take())
        await asyncio.sleep(0)  # the consumer waits
        other = threading.Thread(target=mailbox.put, args=(box, Tokens([1])))
        other.start()
        other.join()  # from another thread: waits for the loop's flush
        mailbox.put(box, Tokens([2]))  # on the loop's thread
        assert [it.ids for it in box.items] == [[1], [2]] and not mailbox.items
        assert await waiter == [Tokens([1]), Tokens([2])]

    asyncio.run(go())
