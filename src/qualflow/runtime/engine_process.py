"""The engine in a child process: the entry point `main` that `EngineProxy` starts with multiprocessing
spawn. The child loads the Task's engine (weights, KV cache, graphs) and owns the device; the parent
keeps validation, prompt rendering and detokenization, so its event loop's work overlaps the GPU step
instead of sharing one GIL with it.

Wire format (pickled tuples over two one-way multiprocessing pipes):
  parent -> child: ("submit", key, GenerationRequest, submitted_ns) | ("cancel", request_id)
                   | ("score", call, token_ids) | ("stop",)
  child -> parent: ("ready", load_timing, info) | ("load_failed", why)
                   | ("step", [(key, token_ids)], [(key, reason, error, first_scheduled_ns, first_token_ns,
                     finished_ns)]): one message per engine step, all of the step's requests
                   | ("score", call, logits ndarray | None, error | None) | ("failed", why) | ("closed",)

The child lives exactly as long as its parent: it is killed when the parent dies (PR_SET_PDEATHSIG,
SIGKILL) and ignores SIGINT and SIGTERM, which reach it too when its process group is signalled, so a
server stopped gracefully closes its engine itself (open requests end as cancelled, not failed).
"""
from __future__ import annotations

import os
import signal
import sys
import threading

from ..lifetime import die_with_parent

HEALTH_INTERVAL_S = 0.25


class Outbox:
    """Collects the engine's items per request during a step (engine thread) and sends them as one
    message at the step's end."""

    def __init__(self, conn):
        self.conn, self.lock = conn, threading.Lock()
        self.tokens: dict[int, list[int]] = {}
        self.finals: list[tuple] = []

    def sink(self, key: int, timing):
        def put(item: tuple) -> None:
            if item[0] == "tokens":
                self.tokens.setdefault(key, []).extend(item[1])
            else:
                self.finals.append((key, item[1], item[2], timing.first_scheduled_ns, timing.first_token_ns,
                                    timing.finished_ns))
        return put

    def flush(self) -> None:  # engine thread, once per step
        if not self.tokens and not self.finals:
            return
        toks, self.tokens = list(self.tokens.items()), {}
        finals, self.finals = self.finals, []
        self.send(("step", toks, finals))

    def send(self, msg: tuple) -> None:
        with self.lock:
            self.conn.send(msg)


def _watch(engine, out: Outbox, stopping: threading.Event) -> None:
    """The engine thread died (a fault the step handlers do not catch): say why, and end the process."""
    while (why := engine.health()) is None or stopping.is_set():
        if stopping.wait(HEALTH_INTERVAL_S):
            return
    try:
        out.send(("failed", why))
    finally:
        os._exit(1)


def _score(engine, out: Outbox, call: int, token_ids: list[int]) -> None:
    try:
        out.send(("score", call, engine.score(token_ids).numpy(), None))
    except Exception as e:  # noqa: BLE001 - the caller raises it
        out.send(("score", call, None, f"{type(e).__name__}: {e}"))


def main(conn_in, conn_out, load, bundle_dir: str, options: dict, parent_pid: int) -> None:
    """`load(bundle_dir, **options)` builds the Task whose engine this process runs."""
    die_with_parent(signal.SIGKILL)
    if os.getppid() != parent_pid:   # the parent died before the request above took effect
        os._exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    options = dict(options)
    if threads := options.pop("cpu_threads", None):
        import torch
        torch.set_num_threads(threads)
    if switch_ms := options.pop("gil_switch_ms", None):
        sys.setswitchinterval(switch_ms / 1000)
    out = Outbox(conn_out)
    try:
        task = load(bundle_dir, **options)
    except BaseException as e:  # noqa: BLE001 - the parent raises it
        out.send(("load_failed", f"{type(e).__name__}: {e}"))
        return
    engine = task.engine
    engine.on_step = out.flush
    stopping = threading.Event()
    threading.Thread(target=_watch, args=(engine, out, stopping), name="qualflow-engine-watch", daemon=True).start()
    out.send(("ready", task.load_timing, task.info))
    from .events import TaskTiming
    while True:
        try:
            msg = conn_in.recv()
        except (EOFError, OSError):   # the parent is gone
            os._exit(0)
        kind = msg[0]
        if kind == "submit":
            _, key, req, submitted_ns = msg
            timing = TaskTiming(submitted_ns=submitted_ns)
            engine.submit(req, out.sink(key, timing), timing)
        elif kind == "cancel":
            engine.cancel(msg[1])
        elif kind == "score":
            threading.Thread(target=_score, args=(engine, out, msg[1], msg[2]), daemon=True).start()
        elif kind == "stop":
            stopping.set()
            engine.close()
            out.send(("closed",))
            return
