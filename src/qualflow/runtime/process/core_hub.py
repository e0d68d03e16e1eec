"""The engine process shared by several API processes (`qualflow serve --api-server-count N`), and
`EngineHost`, the serve process's side that starts it. EngineHost makes one link (two one-way
pipes) per API process, starts the engine process with the engine's ends (its entry point
`main`), and hands API process i `links[i]` (its LinkEnds, for core_client.AttachedEngine). Once
the API processes are started, `release_links` closes this process's copies, so that each side's
death reads as EOF on the other's link.

`main` loads the Task's engine (the model, or the synthetic engine) as process.core does, but
serves one link (a pipe pair, messages.EngineEnds) per API process. As in process.core, the
engine thread reads the links itself (`Hub.feed`, the engine's feed: one poll of every link at a
step boundary, a blocking one while idle).

A request is keyed by its link and the key its API process gave it; each engine step sends each
link one Step holding only its own requests' tokens and finals, and nothing to a link that has
none. The engine keys requests by request id for cancelling: those are the server's response ids
(200 random bits each, unique across API processes).

Stop from a link detaches that API process: its open requests end as cancelled at once (their
finals sent, the engine told to cancel them), it is answered Closed, and the engine goes on for
the others. An API process that is gone (EOF on its link) is detached the same way, unanswered.
Once every link is detached, the engine closes and the process exits. As process.core's, it dies
with its parent (the `qualflow serve` process) and leaves SIGINT/SIGTERM to it; a dead engine
thread is broadcast as Failed to every link before the process exits.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import select
import threading
import time
from collections.abc import Callable

from ..api.events import TaskTiming
from ..config import EngineConfig
from ..engine.outputs import EngineItem, Sink, Tokens
from .core import answer_score, become_engine_process, watch_health
from .messages import (
    Cancel,
    Closed,
    EngineEnds,
    Finished,
    LinkEnds,
    Loaded,
    LoadFailed,
    Score,
    Step,
    Stop,
    Submit,
    recv,
    send,
)

DETACHED = "the API process stopped"


class Link:
    """One API process's link, engine side: its open requests (key -> request id, timing) and what
    the current engine step produced for them (engine thread)."""

    def __init__(self, ends: EngineEnds):
        self.conn_in, self.conn_out = ends.from_api, ends.to_api
        self.lock = threading.Lock()
        self.open: dict[int, tuple[str, TaskTiming]] = {}
        self.tokens: dict[int, list[int]] = {}
        self.finals: list[Finished] = []
        self.closed = False

    def sink(self, key: int, timing: TaskTiming) -> Sink:
        def put(item: EngineItem) -> None:
            if isinstance(item, Tokens):
                self.tokens.setdefault(key, []).extend(item.ids)
            else:
                self.open.pop(key, None)
                self.finals.append(
                    Finished(
                        key,
                        item.reason,
                        item.error,
                        timing.first_scheduled_ns,
                        timing.first_token_ns,
                        timing.finished_ns,
                        timing.answer_first_token_ns,
                        timing.cached_tokens,
                    )
                )

        return put

    def send(self, msg) -> None:
        """Send unless detached; an API process that is gone is noticed by the receiving loop
        (EOF)."""
        with self.lock:
            if self.closed:
                return
            try:
                send(self.conn_out, msg)
            except (OSError, ValueError):
                pass

    def detach(self, answer: bool) -> list[str]:
        """End this link: its open requests' finals (cancelled) and Closed, when `answer`; the
        request ids the engine should cancel."""
        open_ = dict(self.open)
        now = time.time_ns()
        finals = [
            Finished(
                key,
                "cancelled",
                DETACHED,
                t.first_scheduled_ns,
                t.first_token_ns,
                now,
                t.answer_first_token_ns,
                t.cached_tokens,
            )
            for key, (_, t) in open_.items()
        ]
        if answer:
            self.send(Step({}, finals))
            self.send(Closed())
        with self.lock:
            self.closed = True
        self.conn_in.close()
        self.conn_out.close()
        return [rid for rid, _ in open_.values()]


class Hub:
    """The links of one engine; `flush` is the engine's on_step."""

    def __init__(self, engine, links: list[Link], stopping: threading.Event | None = None):
        self.engine, self.links = engine, links
        self.stopping = stopping or threading.Event()  # set once every link detached
        self.poller, self.by_fd = select.poll(), {}
        for link in links:
            self.by_fd[link.conn_in.fileno()] = link
            self.poller.register(link.conn_in.fileno(), select.POLLIN)

    def flush(self) -> None:  # engine thread, once per step
        for link in self.links:
            if link.tokens or link.finals:
                step = Step(link.tokens, link.finals)
                link.tokens, link.finals = {}, []
                link.send(step)

    def send(self, msg) -> None:
        """To every link (the engine's failure)."""
        for link in self.links:
            link.send(msg)

    def apply(self, link: Link, msg) -> None:
        engine = self.engine
        if isinstance(msg, Submit):
            timing = TaskTiming(submitted_ns=msg.submitted_ns)
            link.open[msg.key] = (msg.request.request_id, timing)
            engine.submit(msg.request, link.sink(msg.key, timing), timing)
        elif isinstance(msg, Cancel):
            engine.cancel(msg.request_id)
        elif isinstance(msg, Score):
            threading.Thread(
                target=answer_score, args=(engine, link, msg.call, msg.token_ids), daemon=True
            ).start()
        elif isinstance(msg, Stop):
            self.detach(link, answer=True)

    def detach(self, link: Link, answer: bool) -> None:
        fd = link.conn_in.fileno()
        self.poller.unregister(fd)
        del self.by_fd[fd]
        self.links = [
            x for x in self.links if x is not link
        ]  # a new list: the engine thread may iterate the old
        for request_id in link.detach(answer):
            self.engine.cancel(request_id)
        if not self.links:  # the last API process went: the engine closes
            self.stopping.set()
            self.engine.stop_soon()

    def feed(self, block: bool) -> None:
        """The engine's feed (engine thread): apply what the links sent; when `block`, wait for
        it."""
        ready = self.poller.poll(None if block and self.links else 0)
        while ready:
            for fd, _ in ready:
                link = self.by_fd.get(fd)
                if link is None:
                    continue
                try:
                    msg = recv(link.conn_in)
                except (EOFError, OSError):  # that API process is gone
                    self.detach(link, answer=False)
                    continue
                self.apply(link, msg)
            ready = self.poller.poll(0) if self.links else []


def main(
    ends: list[EngineEnds], load: Callable, bundle_dir: str, cfg: EngineConfig, parent_pid: int
) -> None:
    """`load(bundle_dir, cfg)` builds the Task whose engine this process runs (here, with
    engine_process off); its load timing and info go to every link as Loaded."""
    become_engine_process(parent_pid, cfg)
    links = [Link(e) for e in ends]
    try:
        task = load(bundle_dir, dataclasses.replace(cfg, engine_process="off"))
    except BaseException as e:  # noqa: BLE001 - each API process raises it
        for link in links:
            link.send(LoadFailed(f"{type(e).__name__}: {e}", isinstance(e, ValueError)))
        return
    engine = task.engine
    stopping = threading.Event()
    hub = Hub(engine, links, stopping)
    engine.on_step = hub.flush
    threading.Thread(
        target=watch_health, args=(engine, hub, stopping), name="qualflow-engine-watch", daemon=True
    ).start()
    for link in links:
        link.send(Loaded(task.load_timing, task.info))
    engine.attach_feed(hub.feed)
    engine.thread.join()
    if not stopping.is_set():
        threading.Event().wait()  # the engine thread died: watch_health sends Failed and exits
    engine.close()  # what is still open ends as cancelled (nothing, once every link detached)


STOP_TIMEOUT_S = 45.0  # the engine closes once every API process detached (each waits up to 30 s)


class EngineHost:
    def __init__(self, load: Callable, bundle_dir: str, cfg: EngineConfig, api_processes: int):
        """`load(bundle_dir, cfg)`: a module-level function (pickled by name) that builds the Task
        whose engine the engine process runs."""
        ctx = multiprocessing.get_context("spawn")
        engine_ends, api_ends = [], []
        for _ in range(api_processes):
            from_api, to_engine = ctx.Pipe(duplex=False)
            from_engine, to_api = ctx.Pipe(duplex=False)
            engine_ends.append(EngineEnds(from_api, to_api))
            api_ends.append((to_engine, from_engine))
        self.proc = ctx.Process(
            target=main,
            name="qualflow-engine",
            daemon=True,
            args=(engine_ends, load, str(bundle_dir), cfg, os.getpid()),
        )
        self.proc.start()
        self.pid = self.proc.pid
        for e in engine_ends:
            e.from_api.close()
            e.to_api.close()
        self.links = [
            LinkEnds(to_engine, from_engine, self.pid) for to_engine, from_engine in api_ends
        ]

    def release_links(self) -> None:
        """The API processes hold their ends now: close ours."""
        for link in self.links:
            link.to_engine.close()
            link.from_engine.close()

    def exit_reason(self) -> str:
        code = self.proc.exitcode
        how = (
            "is running"
            if code is None
            else (f"was killed by signal {-code}" if code < 0 else f"exited with code {code}")
        )
        return f"the engine process (pid {self.pid}) {how}"

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Wait for the engine process to exit (it does once every API process detached); kill it
        after `timeout_s`."""
        self.proc.join(timeout=timeout_s)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
