"""Who reads an engine link's incoming pipe (process.core_client): its receiver thread, or the
asyncio loop the caller serves from. Once a loop asks (`read_on`, at a stream's opening), the
receiver thread hands the pipe over and the loop reads it itself (`add_reader`): an engine step's
tokens reach the loop with one wake-up, not a thread's and then the loop's. The thread takes the
pipe back to close the link, for a blocking call made on that loop's own thread (a score), and when
the loop stops running or closes (a request submitted later, from anywhere, is read again).

The states: "thread" (the receiver thread reads), "pending" (the loop was asked to start reading),
"loop" (it reads). Only the receiver thread moves "thread" to "pending"; anyone moves the others
back. `handle(msg)` is the link's, called on whichever thread reads; it returns True once the link
is done (the engine answered Closed).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from multiprocessing.connection import wait

from .messages import recv

GIVE_BACK_TIMEOUT_S = 5.0
LIVENESS_INTERVAL_S = (
    0.5  # how often the waiting receiver thread checks that the reading loop still runs
)


class PipeReading:
    def __init__(self, conn, handle: Callable[[object], bool]):
        self.conn, self.handle = conn, handle
        self._wake_r, self._wake_w = os.pipe()
        self._lock = threading.Lock()
        self._state = "thread"
        self._wanted: asyncio.AbstractEventLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._back = threading.Event()  # set while the receiver thread may read
        self._back.set()
        self._done = False  # the loop read Closed
        self._no_loop = False  # closing: no loop reads again

    # ---- any thread ------------------------------------------------------------------------------
    def read_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Ask that `loop` read the pipe (from its own thread, where it runs). No-op while it
        already does or is asked to; a loop that stopped running gives the pipe back first."""
        self.ensure_live()
        if self._no_loop or self._state != "thread" or self._wanted is loop:
            return
        self._wanted = loop
        try:
            os.write(self._wake_w, b"\0")
        except OSError:  # the link ended meanwhile
            pass

    def on_loop_thread(self) -> bool:
        return self._loop_thread == threading.get_ident()

    def ensure_live(self) -> None:
        """If a loop holds the pipe (or was asked to) but no longer runs, the receiver thread
        reads again."""
        loop = self._loop
        if loop is not None and (loop.is_closed() or not loop.is_running()):
            self.take_back()

    def take_back(self, closing: bool = False) -> None:
        """The receiver thread reads from now on (`closing`: for good). Waits until the loop stopped
        reading, at most GIVE_BACK_TIMEOUT_S (a loop that does not run then cannot be reading)."""
        self._no_loop = self._no_loop or closing
        with self._lock:
            if self._state == "thread":
                return
            loop = self._loop
            if self._state == "pending":
                self._back_to_thread()
                return
            if (
                threading.get_ident() == self._loop_thread
                or loop.is_closed()
                or not loop.is_running()
            ):
                self._back_to_thread()
                return
        try:
            loop.call_soon_threadsafe(self._give_back)
        except RuntimeError:  # closed meanwhile
            pass
        if not self._back.wait(GIVE_BACK_TIMEOUT_S):
            with self._lock:
                self._back_to_thread()

    def close(self) -> None:
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    # ---- the loop --------------------------------------------------------------------------------
    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            if self._state != "pending" or self._loop is not loop:  # taken back before it began
                return
            self._state, self._loop_thread = "loop", threading.get_ident()
            loop.add_reader(self.conn.fileno(), self._on_readable)

    def _on_readable(self) -> None:
        try:
            while self.conn.poll():
                if self.handle(recv(self.conn)):
                    self._done = True
                    break
        except (
            EOFError,
            OSError,
        ):  # the engine is gone: the receiver thread reads the EOF and ends the link
            pass
        else:
            if not self._done:
                return
        self._give_back()

    def _give_back(self) -> None:
        with self._lock:
            if self._state == "loop":
                self._back_to_thread()

    def _back_to_thread(self) -> None:  # with the lock held
        loop = self._loop
        if self._state == "loop" and not loop.is_closed():
            loop.remove_reader(self.conn.fileno())
        self._state, self._loop, self._loop_thread = "thread", None, None
        self._back.set()

    # ---- the receiver thread ---------------------------------------------------------------------
    def run(self) -> None:
        """Read and handle until `handle` says done; raises EOFError / OSError when the engine is
        gone. While a loop reads, wait until it gives the pipe back."""
        try:
            self._run()
        finally:
            self._no_loop = True

    def _run(self) -> None:
        while True:
            ready = wait([self.conn, self._wake_r])
            if self._wake_r in ready:
                os.read(self._wake_r, 64)
                if self._hand_over():
                    while not self._back.wait(
                        LIVENESS_INTERVAL_S
                    ):  # a loop that ended without giving it back
                        self.ensure_live()
                    if self._done:
                        return
                    continue
            if self.conn in ready and self.handle(recv(self.conn)):
                return

    def _hand_over(self) -> bool:
        loop, self._wanted = self._wanted, None
        with self._lock:
            if loop is None or self._no_loop or self._state != "thread" or loop.is_closed():
                return False
            self._state, self._loop = "pending", loop
            self._back.clear()
        try:
            loop.call_soon_threadsafe(self._start, loop)
        except RuntimeError:  # closed meanwhile
            with self._lock:
                self._back_to_thread()
            return False
        return True
