"""What the routes share: the Task once loaded (or why it failed to load), admission, the timing
store, and the one place a request's timing record is finalized."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..admission import Admission
from ..handler import ResponsesHandler, engine_unavailable
from ..processes.peers import Peers
from ..protocol.errors import ApiError
from ..store import AsyncStore, StoreConfig
from ..timing import TimingRecord, TimingStore

log = logging.getLogger("qualflow.server")


class ServerState:
    """Readiness (`handler` is None until the Task is loaded; `error` says why it never will be),
    admission, the timing store and the pool that prepares large requests off the event loop."""

    def __init__(
        self,
        *,
        task: Any,
        model_name: str | None,
        started_ns: int,
        max_queue: int,
        store: TimingStore,
        reasoning_budgets: tuple[int, ...] | None = None,
        peers: Peers | None = None,
    ):
        self.task, self.model_name, self.started_ns, self.max_queue = (
            task,
            model_name,
            started_ns,
            max_queue,
        )
        self.reasoning_budgets = reasoning_budgets
        self.store = store
        self.handler: ResponsesHandler | None = None
        self.error: str | None = None
        self.ready_ns: int | None = None
        self.peers = peers  # the server's other API processes, if any
        self.admission = peers.admission if peers is not None else Admission(max_queue)
        self.prep_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="qualflow-prepare")
        # the response store (app.add_state): None keeps every request stateless
        self.response_store: AsyncStore | None = None
        self.store_config: StoreConfig | None = None
        self.store_backend: str | None = None
        self.retain = False  # this process runs the store's retention

    def become_ready(self, task: Any) -> None:
        """Serve `task` from now on: at most its batch + the queue are admitted at once."""
        self.admission.fit(int(getattr(task, "max_batch", 1)) + self.max_queue)
        handler = ResponsesHandler(task, self.model_name, self.reasoning_budgets)
        self.task, self.handler, self.ready_ns = task, handler, time.time_ns()
        if self.peers is not None:
            self.peers.mark_ready()
        log.info(
            "ready: model %r loaded in %.2fs, startup %.2fs",
            self.handler.model_name,
            task.load_timing.get("load_s", float("nan")),
            (self.ready_ns - self.started_ns) / 1e9,
        )

    def ready_handler(self) -> ResponsesHandler:
        """The handler, or the 503 that says why there is none (loading, load failed, engine
        down)."""
        handler = self.handler
        if handler is None:
            if self.error:
                raise ApiError(
                    503,
                    f"The model failed to load ({self.error}).",
                    "server_error",
                    None,
                    "model_not_ready",
                )
            raise ApiError(
                503,
                "The model is not loaded yet (loading).",
                "server_error",
                None,
                "model_not_ready",
                retry_after=2,
            )
        if (why := handler.health()) is not None:
            raise engine_unavailable(why)
        return handler

    def finish(
        self, rec: TimingRecord, http_status: int, admitted: bool, sent_ns: int | None = None
    ) -> None:
        """The last byte is out (or the request is over): finalize the record, once. `sent_ns`:
        when the last byte went to the transport (default now)."""
        if rec.http_sent_ns is not None:
            return
        if admitted:
            self.admission.leave()
        rec.http_status = rec.http_status or http_status
        if rec.status == "in_progress":  # nothing decided it: it ended without an outcome
            rec.fail("the request ended without an outcome", http_status)
        self.store.finish(rec, sent_ns or time.time_ns())
        if log.isEnabledFor(logging.INFO):
            _log_request(rec)

    def close(self) -> None:
        if self.peers is not None:
            self.peers.closing()
        if self.task is not None:
            self.task.close()
        self.prep_pool.shutdown(wait=False)
        self.store.close()
        if self.response_store is not None:
            self.response_store.store.close()


def _log_request(rec: TimingRecord) -> None:
    t = rec.public_task_call_wall_ns
    log.info(
        "request_id=%s response_id=%s tag=%s stream=%s http=%s status=%s finish=%s in=%s out=%s "
        "task_ms=%s http_ms=%.1f%s",
        rec.request_id,
        rec.response_id,
        rec.tag,
        rec.stream,
        rec.http_status,
        rec.status,
        rec.finish_reason,
        rec.input_tokens,
        rec.output_tokens,
        None if t is None else round(t / 1e6, 1),
        (rec.http_sent_ns - rec.http_received_ns) / 1e6,
        f" error={rec.error!r}" if rec.error else "",
    )
