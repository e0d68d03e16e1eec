"""The Responses handler: CreateResponse -> Response | stream of events, over the public Task API
only.

No HTTP here. Every refusal is an `ApiError` raised before anything is queued (and so before a
stream starts); engine outcomes map to Response status (protocol.responses.FINAL_STATUS): stop ->
completed, length -> incomplete (max_output_tokens), error -> failed, cancelled (the client went
away) -> failed.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from qualflow.runtime import (
    REASONING,
    STREAMING,
    TEXT_GENERATION,
    CapabilityMissing,
    FinalEvent,
    GenerationRequest,
    InvalidRequest,
)

from .batch_stream import BatchStream
from .message_stream import message_stream
from .message_tail import MessageTail, terminal_events
from .protocol.errors import ApiError, bad_request
from .protocol.events import Event, TextDelta
from .protocol.input_items import input_messages
from .protocol.requests import CreateResponse
from .protocol.responses import FINAL_STATUS, Response, new_id
from .protocol.tools import ToolRequest
from .reasoning_stream import reasoning_stream
from .supported import check_supported, request_features, unsupported
from .task_events import RequestEvents
from .thinking import thinking_for, wants_thinking
from .timing import TimingRecord, new_record
from .tool_stream import tool_stream
from .tools import echo, grammar_for, render, request_tools, with_calls

# Task/SamplingParams field names -> the request param a client set
_PARAM_NAMES = {"max_new_tokens": "max_output_tokens", "prompt_token_ids": "input"}
# The timing record's status: the Response's, but a cancelled generation is kept apart from failures
RECORD_STATUS = {**FINAL_STATUS, "cancelled": "cancelled"}


@dataclass
class Prepared:
    req: CreateResponse
    gen: GenerationRequest
    record: TimingRecord
    response_id: str
    message_id: str
    created_at: int
    abandoned: bool = False
    reasoning_id: str | None = None  # thinking on: the reasoning item's id
    tools: ToolRequest = ToolRequest()  # the request's tools and output format (server.tools)


def engine_unavailable(why: str) -> ApiError:
    return ApiError(
        503, f"The engine cannot serve requests: {why}", "server_error", None, "engine_failed"
    )


class ResponsesHandler:
    def __init__(
        self,
        task: Any,
        model_name: str | None = None,
        reasoning_budgets: tuple[int, ...] | None = None,
    ):
        """`reasoning_budgets`: thinking budgets per effort overriding the family's
        (ServerConfig)."""
        self.task = task
        self.model_name = model_name or task.model_name
        self.reasoning_budgets = reasoning_budgets
        self.inflight: dict[
            str, Prepared
        ] = {}  # response_id -> a request whose Task call is running
        task.require(TEXT_GENERATION)

    def reasoning_info(self) -> dict | None:
        """What /health says of thinking: the budget of each effort (null: unbounded) and the
        default effort (null: off); None for a Task without the `reasoning` capability."""
        spec = getattr(self.task, "reasoning", None)
        if spec is None or REASONING not in self.task.capabilities:
            return None
        return {
            "budgets": {e: spec.budget(e, self.reasoning_budgets) for e in spec.budgets},
            "default_effort": spec.default_effort,
        }

    def health(self) -> str | None:
        """None while the Task can serve; otherwise why not."""
        check = getattr(self.task, "health", None)
        return check() if check is not None else None

    # ---------------------------------------------------- validation (thread-safe: no loop state)

    def prepare(
        self, req: CreateResponse, request_id: str, record: TimingRecord | None = None
    ) -> Prepared:
        record = (
            record
            if record is not None
            else new_record(request_id, new_id("resp"), None, req.stream, time.time_ns())
        )
        if req.model is None:
            raise bad_request(
                "Missing required parameter: 'model'.", "model", "missing_required_parameter"
            )
        if req.model != self.model_name:
            raise bad_request(
                f"The requested model '{req.model}' does not exist. This server serves "
                f"'{self.model_name}'.",
                "model",
                "model_not_found",
            )
        if req.input is None:
            raise bad_request(
                "Missing required parameter: 'input'.", "input", "missing_required_parameter"
            )
        if req.stream:
            try:
                self.task.require(STREAMING)
            except CapabilityMissing as e:
                raise unsupported("stream", f"cannot be true: {e}", "unsupported_value") from None
        messages = input_messages(req.input)
        family = self.task.family
        for feature, param in request_features(req, messages).items():
            if feature in family.unsupported_features:
                why = family.unsupported_features[feature]
                raise unsupported(
                    param,
                    f"asks for '{feature}', which the {family.name} family does not "
                    f"support{': ' + why if why else ''}",
                )
        if wants_thinking(req) and REASONING not in self.task.capabilities:
            why = getattr(self.task, "reasoning_unavailable", None)
            raise unsupported(
                "reasoning",
                f"asks for 'reasoning', which the {family.name} family does not "
                f"support{': ' + why if why else ''}",
            )
        check_supported(req)
        tools = request_tools(req, self.task)
        thinking = thinking_for(req, self.task, self.reasoning_budgets)
        try:
            ids = render(self.task, req, messages, thinking, tools)
            params = req.to_sampling_params(
                self.task.default_params, self.task.context_limit - len(ids)
            )
            gen = GenerationRequest(record.response_id, ids, params, thinking, grammar_for(tools))
            self.task.validate(gen)
        except InvalidRequest as e:
            param = _PARAM_NAMES.get(e.param, e.param)
            raise bad_request(str(e), param, e.code) from None
        record.input_tokens = len(ids)
        return Prepared(
            req,
            gen,
            record,
            record.response_id,
            new_id("msg"),
            int(time.time()),
            reasoning_id=new_id("rs") if thinking else None,
            tools=tools,
        )

    # ------------------------------------------------------------ running

    def _record(self, p: Prepared, final: FinalEvent) -> None:
        p.record.finish(
            "cancelled" if p.abandoned else RECORD_STATUS[final.finish_reason],
            final.finish_reason,
            final.error,
            final.prompt_tokens,
            final.completion_tokens,
            final.timing.as_dict(),
        )
        if p.reasoning_id is not None:
            p.record.reasoning_tokens = final.reasoning_tokens
            p.record.answer_tokens = final.completion_tokens - final.reasoning_tokens

    def abandon(self, response_id: str) -> None:
        """The client left before the final event: cancel the Task request; its final event still
        comes (finish reason cancelled) and completes the record. Idempotent."""
        if (p := self.inflight.get(response_id)) is not None and not p.abandoned:
            p.abandoned = True
            p.record.cancel()
            self.task.cancel(p.gen.request_id)

    def _events(self, p: Prepared) -> RequestEvents:
        """The Task's events of `p`, submitted now; the last is always a FinalEvent."""
        return RequestEvents(self.task, p, self.inflight, self._record)

    async def create_response(
        self,
        req: CreateResponse,
        request_id: str,
        record: TimingRecord | None = None,
        prepared: Prepared | None = None,
    ) -> Response:
        p = prepared or self.prepare(req, request_id, record)
        self._check_engine()
        final, events = None, self._events(p)
        try:
            async for ev in events:
                final = ev if isinstance(ev, FinalEvent) else None
        finally:
            if final is None:  # closed early (the caller was cancelled)
                self.abandon(p.response_id)
            await events.aclose()
        if final.finish_reason in ("error", "cancelled"):
            raise ApiError(
                500,
                f"Generation {final.finish_reason}: {final.error or 'no detail'}",
                "server_error",
                None,
                "server_error",
            )
        resp = echo(
            Response.from_request(
                p.req, p.gen.params, p.response_id, p.created_at, self.model_name
            ),
            p.req,
        ).finished(final, p.message_id, reasoning_id=p.reasoning_id)
        return with_calls(resp, final, self.task, p) if p.tools.calls else resp

    def _check_engine(self) -> None:
        if (why := self.health()) is not None:
            raise engine_unavailable(why)

    def stream_response(
        self, req: CreateResponse, request_id: str, record: TimingRecord | None = None
    ) -> AsyncIterator[Event | TextDelta]:
        """Validates now (errors raise before any event exists), then returns the event stream."""
        p = self.prepare(req, request_id, record)
        self._check_engine()
        return self._flat(self.stream_batches(p))

    @staticmethod
    async def _flat(batches):
        async with aclosing(batches):
            async for batch in batches:
                for e in batch:  # a message's tail: the events it stands for
                    for one in e.events() if isinstance(e, MessageTail) else (e,):
                        yield one

    def stream_batches(self, p: Prepared) -> BatchStream:
        """The stream as lists of events, one list per write: the head, one delta per Task token
        event (one per engine step), then the tail. The request is submitted to the Task now,
        before the caller builds or sends anything (the engine prefills meanwhile). A caller that
        stops early, or closes the stream without reading it, cancels the Task request."""
        events = self._events(p)

        async def close() -> None:
            if not events.done:  # closed before the final (or before the head went out)
                self.abandon(p.response_id)
            await events.aclose()

        return BatchStream(self._numbered(p, events), close)

    async def _numbered(
        self, p: Prepared, events: RequestEvents
    ) -> AsyncIterator[list[Event | TextDelta]]:
        """The batches, numbered; ending the request when they stop is BatchStream.aclose's."""
        seq = 0

        def number(batch):
            nonlocal seq
            for e in batch:  # a message's tail stands for several events
                e.sequence_number = seq
                seq += e.count if isinstance(e, MessageTail) else 1
            return batch

        snapshot = echo(
            Response.from_request(
                p.req, p.gen.params, p.response_id, p.created_at, self.model_name
            ),
            p.req,
        )
        if p.tools.calls:
            parser = self.task.tool_parser()
            async for batch in tool_stream(p, snapshot, events, parser, terminal_events):
                yield number(batch)
            return
        if p.reasoning_id is not None:
            async for batch in reasoning_stream(
                p, snapshot, events, lambda: self.abandon(p.response_id), terminal_events
            ):
                yield number(batch)
            return
        async for batch in message_stream(p, snapshot, events):
            yield number(batch)
