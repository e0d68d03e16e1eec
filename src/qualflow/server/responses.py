"""The Responses handler: CreateResponse -> Response | stream of events, over the public Task API only.

No HTTP here. Every refusal is an `ApiError` raised before anything is queued (and so before a stream
starts); engine outcomes map to Response status: stop -> completed, length -> incomplete
(max_output_tokens), error -> failed, cancelled -> the client went away.
"""
from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator

from qualflow.runtime import (STREAMING, TEXT_GENERATION, CapabilityMissing, FinalEvent, GenerationRequest,
                              InvalidRequest, TaskTiming, TokenEvent)

from .protocol import (ApiError, ContentPartEvent, CreateResponse, ErrorEvent, Event, OutputItemEvent,
                       OutputMessage, OutputText, Response, ResponseEvent, TextDeltaEvent, TextDoneEvent,
                       Usage, bad_request, input_messages, new_id)
from .timing import TimingRecord, new_record

# Task/SamplingParams field names -> the request param a client set
_PARAM_NAMES = {"max_new_tokens": "max_output_tokens", "prompt_token_ids": "input"}
_STATUS = {"stop": "completed", "length": "incomplete", "error": "failed", "cancelled": "cancelled"}


def _unsupported(param: str, what: str, code: str = "unsupported_parameter") -> ApiError:
    return bad_request(f"Unsupported parameter: '{param}' {what}. This server is stateless, single-turn "
                       "and text-only.", param, code)


def check_supported(req: CreateResponse) -> None:
    """The server-level reject table: fields whose requested behaviour this server cannot honour."""
    if req.previous_response_id is not None:
        raise bad_request(f"Previous response with id '{req.previous_response_id}' not found.",
                          "previous_response_id", "previous_response_not_found")
    for name in ("conversation", "prompt", "context_management", "moderation"):
        if getattr(req, name) is not None:
            raise _unsupported(name, "is not supported (it needs server-side state or features we do not have)")
    if req.background:
        raise _unsupported("background", "must be false: nothing can be polled later", "unsupported_value")
    if req.tools:
        raise _unsupported("tools", "must be empty: tool calling is not supported")
    if req.tool_choice not in (None, "auto", "none"):
        raise _unsupported("tool_choice", "must be 'auto' or 'none': there are no tools", "unsupported_value")
    if req.text is not None and req.text.format is not None and req.text.format != {"type": "text"}:
        raise _unsupported("text.format", "must be {'type': 'text'}: structured output is not supported",
                           "unsupported_value")
    if req.include:
        raise _unsupported("include", "must be empty: no includable output data exists", "unsupported_value")
    if req.top_logprobs:
        raise _unsupported("top_logprobs", "must be 0: logprobs are not supported", "unsupported_value")
    if req.truncation == "auto":
        raise _unsupported("truncation", "must be 'disabled': prompts over the context limit are refused",
                           "unsupported_value")
    md = req.metadata or {}
    if len(md) > 16 or any(len(k) > 64 or len(v) > 512 for k, v in md.items()):
        raise bad_request("Invalid 'metadata': at most 16 keys, keys up to 64 and values up to 512 characters.",
                          "metadata", "invalid_value")


def request_features(req: CreateResponse, messages: list[dict]) -> dict[str, str]:
    """Features this request asks for, by the names families use in `unsupported_features`,
    each mapped to the param that asks for it."""
    f = {}
    if req.reasoning and any(v is not None for v in req.reasoning.values()):
        f["reasoning"] = "reasoning"
    if req.instructions is not None:
        f["instructions"] = "instructions"
    if any(m["role"] in ("system", "developer") for m in messages):
        f["system_messages"] = "input"
    if any(m["role"] == "assistant" for m in messages):
        f["multi_turn"] = "input"
    for name in ("temperature", "top_p", "ignore_eos", "min_tokens"):
        if getattr(req, name) is not None:
            f[name] = name
    return f


@dataclass
class Prepared:
    req: CreateResponse
    gen: GenerationRequest
    record: TimingRecord
    response_id: str
    message_id: str
    created_at: int
    abandoned: bool = False
    producer: asyncio.Task | None = None


class ResponsesHandler:
    def __init__(self, task: Any, model_name: str | None = None):
        self.task = task
        self.model_name = model_name or task.model_name
        self.inflight: dict[str, Prepared] = {}   # response_id -> a request whose Task call is running
        task.require(TEXT_GENERATION)

    # ------------------------------------------------------------ validation

    def prepare(self, req: CreateResponse, request_id: str, record: TimingRecord | None = None) -> Prepared:
        record = record if record is not None else new_record(request_id, new_id("resp"), None, req.stream,
                                                               time.time_ns())
        if req.model is None:
            raise bad_request("Missing required parameter: 'model'.", "model", "missing_required_parameter")
        if req.model != self.model_name:
            raise bad_request(f"The requested model '{req.model}' does not exist. This server serves "
                              f"'{self.model_name}'.", "model", "model_not_found")
        if req.input is None:
            raise bad_request("Missing required parameter: 'input'.", "input", "missing_required_parameter")
        if req.stream:
            try:
                self.task.require(STREAMING)
            except CapabilityMissing as e:
                raise _unsupported("stream", f"cannot be true: {e}", "unsupported_value") from None
        messages = input_messages(req.input)
        family = self.task.family
        for feature, param in request_features(req, messages).items():
            if feature in family.unsupported_features:
                why = family.unsupported_features[feature]
                raise _unsupported(param, f"asks for '{feature}', which the {family.name} family does not "
                                          f"support{': ' + why if why else ''}")
        check_supported(req)
        try:
            ids = self.task.render_prompt(req.instructions, messages)
            max_new = req.max_output_tokens or max(1, self.task.context_limit - len(ids))
            params = self.task.default_params(
                max_new_tokens=max_new, temperature=1.0 if req.temperature is None else req.temperature,
                top_p=1.0 if req.top_p is None else req.top_p, ignore_eos=bool(req.ignore_eos),
                min_tokens=req.min_tokens or 0)
            gen = GenerationRequest(record.response_id, ids, params)
            self.task.validate(gen)
        except InvalidRequest as e:
            param = _PARAM_NAMES.get(e.param, e.param)
            raise bad_request(str(e), param, e.code) from None
        record.input_tokens = len(ids)
        return Prepared(req, gen, record, record.response_id, new_id("msg"), int(time.time()))

    # ------------------------------------------------------------ results

    def _response(self, p: Prepared, final: FinalEvent | None = None) -> Response:
        r, params = p.req, p.gen.params
        resp = Response(id=p.response_id, created_at=p.created_at, model=self.model_name,
                        instructions=r.instructions, max_output_tokens=r.max_output_tokens,
                        max_tool_calls=r.max_tool_calls, temperature=params.temperature, top_p=params.top_p,
                        parallel_tool_calls=True if r.parallel_tool_calls is None else r.parallel_tool_calls,
                        tool_choice=r.tool_choice or "auto", metadata=r.metadata or {}, user=r.user,
                        safety_identifier=r.safety_identifier, prompt_cache_key=r.prompt_cache_key)
        if final is None:
            return resp
        status = _STATUS[final.finish_reason]
        resp.status = status
        resp.usage = Usage(input_tokens=final.prompt_tokens, output_tokens=final.completion_tokens,
                           total_tokens=final.prompt_tokens + final.completion_tokens)
        if status == "completed":
            resp.completed_at = int(time.time())
        elif status == "incomplete":
            resp.incomplete_details = {"reason": "max_output_tokens"}
        elif status == "failed":
            resp.error = {"code": "server_error", "message": final.error or "generation failed"}
        if status in ("completed", "incomplete"):
            resp.output = [self._message(p, final.text, status)]
        return resp

    def _message(self, p: Prepared, text: str | None, status: str = "in_progress") -> OutputMessage:
        content = [] if text is None else [OutputText(text=text)]
        return OutputMessage(id=p.message_id, status=status, content=content)

    def _record(self, p: Prepared, final: FinalEvent) -> None:
        p.record.finish("cancelled" if p.abandoned else _STATUS[final.finish_reason], final.finish_reason,
                        final.error, final.prompt_tokens, final.completion_tokens, final.timing.as_dict())

    def _submit(self, p: Prepared) -> asyncio.Queue:
        """Run the Task request on its own asyncio task; its events (or an exception) arrive on the queue.
        Decoupled from the HTTP side so that a client leaving early cancels the request (`abandon`) while
        the record still gets the Task's own final event and timing."""
        q: asyncio.Queue = asyncio.Queue()

        async def produce():
            try:
                async for ev in self.task.generate(p.gen):
                    if isinstance(ev, FinalEvent):
                        self._record(p, ev)
                    q.put_nowait(ev)
            except Exception as e:  # noqa: BLE001 - handed to the consumer, which reports it
                p.record.fail(f"{type(e).__name__}: {e}")
                q.put_nowait(e)
            finally:
                self.inflight.pop(p.response_id, None)

        self.inflight[p.response_id] = p
        p.producer = asyncio.ensure_future(produce())
        return q

    @staticmethod
    async def _next(q: asyncio.Queue) -> TokenEvent | FinalEvent:
        ev = await q.get()
        if isinstance(ev, Exception):
            raise ev
        return ev

    def abandon(self, response_id: str) -> None:
        """The consumer left before the final event (client gone): cancel the Task request. Idempotent."""
        if (p := self.inflight.get(response_id)) is not None and not p.abandoned:
            p.abandoned = True
            p.record.cancel()
            self.task.cancel(p.gen.request_id)

    async def create_response(self, req: CreateResponse, request_id: str, record: TimingRecord | None = None) -> Response:
        p = self.prepare(req, request_id, record)
        q, final = self._submit(p), None
        try:
            while not isinstance(final, FinalEvent):
                final = await self._next(q)
        except Exception as e:  # noqa: BLE001
            raise ApiError(500, f"Generation failed: {type(e).__name__}: {e}", "server_error", None,
                           "server_error") from e
        finally:
            if not isinstance(final, FinalEvent):
                self.abandon(p.response_id)
        if final.finish_reason in ("error", "cancelled"):
            raise ApiError(500, f"Generation {final.finish_reason}: {final.error or 'no detail'}",
                           "server_error", None, "server_error")
        return self._response(p, final)

    def stream_response(self, req: CreateResponse, request_id: str, record: TimingRecord | None = None
                        ) -> AsyncIterator[Event]:
        """Validates and submits now (errors raise before any event exists), then returns the event stream.
        A caller that never iterates it must call `abandon(response_id)`."""
        p = self.prepare(req, request_id, record)
        return self._stream(p, self._submit(p))

    async def _stream(self, p: Prepared, q: asyncio.Queue) -> AsyncIterator[Event]:
        seq = itertools.count()

        def ev(e: Event) -> Event:
            e.sequence_number = next(seq)
            return e

        ids = dict(item_id=p.message_id)
        text, final, failure = "", None, "no final event"
        try:
            snapshot = self._response(p)
            yield ev(ResponseEvent(type="response.created", response=snapshot))
            yield ev(ResponseEvent(type="response.in_progress", response=snapshot))
            yield ev(OutputItemEvent(type="response.output_item.added", item=self._message(p, None)))
            yield ev(ContentPartEvent(type="response.content_part.added", part=OutputText(), **ids))
            while not isinstance(e := await self._next(q), FinalEvent):
                if e.text:
                    text += e.text
                    yield ev(TextDeltaEvent(delta=e.text, **ids))
            final = e
        except Exception as exc:  # noqa: BLE001 - an engine fault becomes error + response.failed, not a cut stream
            failure = f"{type(exc).__name__}: {exc}"
        finally:
            if final is None:
                self.abandon(p.response_id)
        if final is None or final.finish_reason == "cancelled":   # not by this client: it is still here
            final = final or FinalEvent(p.gen.request_id, "error", len(p.gen.prompt_token_ids), 0, text, [],
                                        TaskTiming(p.record.http_received_ns), failure)
            final.error, final.finish_reason = final.error or "request cancelled", "error"
        if final.tail_text:   # text the decoder held back (an incomplete character) until the end
            text += final.tail_text
            yield ev(TextDeltaEvent(delta=final.tail_text, **ids))
        status = "incomplete" if final.finish_reason != "stop" else "completed"
        yield ev(TextDoneEvent(text=text, **ids))
        yield ev(ContentPartEvent(type="response.content_part.done", part=OutputText(text=text), **ids))
        yield ev(OutputItemEvent(type="response.output_item.done", item=self._message(p, text, status)))
        resp = self._response(p, final)
        if resp.status == "failed":
            err = {"type": "server_error", "code": "server_error", "message": resp.error["message"], "param": None}
            yield ev(ErrorEvent(code="server_error", message=err["message"], error=err))
        yield ev(ResponseEvent(type=f"response.{resp.status}", response=resp))
