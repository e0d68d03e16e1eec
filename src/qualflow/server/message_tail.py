"""The tail of a message stream without thinking or tools (message_stream): its `*.done` events and
its terminal event as one object, `MessageTail`, which stands for them in the stream's last batch.

A consumer of events (the store, `stream_response`) gets the pydantic models (`events()`). The
wire gets their JSON (`rendered()`), cut where it can be from templates made at the head of the
request (`TailTemplates`): the four events serialised once with marker values, so the end of the
request splices in the text, the usage, the sequence numbers and the time. It does not validate and
serialise ~5 KB of models once the whole response has streamed. By then the models' code was cold,
and on a c1 stream that work was most of the time from the last token to the last write.

A marker is a value no request supplies in practice. A template is used only where each of its
markers was found exactly once in each event. A request that echoes one (in its instructions or
metadata, say) gets the models serialised as before. So does a failed response, which has no
template."""

from __future__ import annotations

import time
from dataclasses import dataclass

import orjson

from qualflow.runtime import FinalEvent, TaskTiming

from .protocol.events import (
    ContentPartEvent,
    ErrorEvent,
    Event,
    OutputItemEvent,
    ResponseEvent,
    TextDoneEvent,
)
from .protocol.responses import FINAL_STATUS, Response

TEXT = "\ue000qualflow tail text\ue000"
_INPUT, _OUTPUT = 4_100_000_000_000_000_011, 4_200_000_000_000_000_013
_CACHED, _REASONING = 4_300_000_000_000_000_017, 4_400_000_000_000_000_019
_TIME = 4_500_000_000_000_000_023
_SEQ = 4_600_000_000_000_000_029  # the first event's; the others' follow
# each slot's marker as it appears in the JSON: ints after a colon, the text as a JSON string
_MARKS = {
    "text": orjson.dumps(TEXT),
    "input": b":%d" % _INPUT,
    "output": b":%d" % _OUTPUT,
    "total": b":%d" % (_INPUT + _OUTPUT),
    "cached": b":%d" % _CACHED,
    "reasoning": b":%d" % _REASONING,
    "time": b":%d" % _TIME,
    **{f"seq{i}": b":%d" % (_SEQ + i) for i in range(4)},
}
_PER_EVENT = (  # the slots each of the four events holds; the terminal one's time when completed
    ("seq0", "text"),
    ("seq1", "text"),
    ("seq2", "text"),
    ("seq3", "text", "input", "cached", "output", "reasoning", "total"),
)


@dataclass(frozen=True)
class Template:
    """One event's JSON cut at its slots: `chunks` has one more element than `slots`."""

    type: str
    chunks: tuple[bytes, ...]
    slots: tuple[str, ...]

    @classmethod
    def cut(cls, e: Event, slots: tuple[str, ...]) -> Template | None:
        data = event_json(e)
        if any(data.count(_MARKS[s]) != 1 for s in slots) or any(
            data.count(_MARKS[s]) for s in _MARKS.keys() - set(slots)
        ):
            return None
        at = sorted((data.index(_MARKS[s]), s) for s in slots)
        chunks, start = [], 0
        for pos, s in at:
            chunks.append(data[start:pos])
            start = pos + len(_MARKS[s])
        chunks.append(data[start:])
        return cls(e.type, tuple(chunks), tuple(s for _, s in at))

    def render(self, values: dict[str, bytes]) -> bytes:
        out = [self.chunks[0]]
        for s, chunk in zip(self.slots, self.chunks[1:]):
            out += (values[s], chunk)
        return b"".join(out)


def event_json(e: Event) -> bytes:
    """An event model's wire JSON."""
    return e.__pydantic_serializer__.to_json(e)


def done_events(resp: Response, text: str, item_id: str) -> list[Event]:
    """The `*.done` events of a finished response's message: they carry the response's own message
    and text part."""
    (message,) = resp.output
    return [
        TextDoneEvent(text=text, item_id=item_id),
        ContentPartEvent(
            type="response.content_part.done", part=message.content[0], item_id=item_id
        ),
        OutputItemEvent(type="response.output_item.done", item=message),
    ]


def terminal_events(final: FinalEvent, resp: Response) -> list[Event]:
    """The stream's last events: an `error` event for a failed response, then
    `response.<status>`."""
    out: list[Event] = []
    if resp.status == "failed":
        if final.finish_reason == "cancelled" and not final.error:
            resp.error["message"] = "request cancelled"
        err = {
            "type": "server_error",
            "code": "server_error",
            "message": resp.error["message"],
            "param": None,
        }
        out.append(ErrorEvent(code="server_error", message=err["message"], error=err))
    out.append(ResponseEvent(type=f"response.{resp.status}", response=resp))
    return out


@dataclass
class MessageTail:
    """The tail's events as one entry of the last batch; the caller numbers them from
    `sequence_number` (`count` of them). `templates`: the request's, made at its head."""

    snapshot: Response
    final: FinalEvent
    item_id: str
    text: str
    templates: TailTemplates | None = None
    sequence_number: int = 0

    @property
    def count(self) -> int:
        """Three `*.done` events and the terminal one, after an `error` event when failed."""
        return 5 if FINAL_STATUS.get(self.final.finish_reason, "failed") == "failed" else 4

    def events(self) -> list[Event]:
        """The models, numbered (the response finished now)."""
        resp = self.snapshot.finished(self.final, self.item_id, self.text)
        events = done_events(resp, self.text, self.item_id) + terminal_events(self.final, resp)
        for i, e in enumerate(events):
            e.sequence_number = self.sequence_number + i
        return events

    def rendered(self) -> list[tuple[str, bytes]]:
        """(type, JSON) of each event: cut from the templates where they hold, else the models'."""
        out = self.templates.render(self) if self.templates is not None else None
        if out is None:
            out = [(e.type, event_json(e)) for e in self.events()]
        return out


class TailTemplates:
    """The tail's templates made from a stream's snapshot (its head's Response) and message id,
    for the finish reason the request expects ("length": incomplete, for a request that ignores
    its stop tokens; "stop": completed, otherwise). Another reason (a request cut by its
    max_output_tokens, an error, a cancelled request), or a marker the request echoes, renders
    from the models. One reason, not both: a template costs about four times what the models
    cost at the end when warm, which a server at high concurrency pays for every request."""

    def __init__(self, snapshot: Response, item_id: str, reason: str):
        events = _marked(snapshot, item_id, reason)
        cut = tuple(Template.cut(e, slots) for e, slots in zip(events, _slots(reason)))
        self.reason = reason
        self.cut: tuple[Template, ...] | None = cut if None not in cut else None

    @staticmethod
    def expected_reason(ignore_eos: bool) -> str:
        return "length" if ignore_eos else "stop"

    def render(self, tail: MessageTail) -> list[tuple[str, bytes]] | None:
        """(type, JSON) of the tail's events, or None where it has no template (another reason, or
        none could be cut)."""
        if self.cut is None or tail.final.finish_reason != self.reason:
            return None
        f, seq = tail.final, tail.sequence_number
        try:
            text = orjson.dumps(tail.text)
        except orjson.JSONEncodeError:  # not valid UTF-8: the models say how
            return None
        values = {
            "text": text,
            "input": b":%d" % f.prompt_tokens,
            "output": b":%d" % f.completion_tokens,
            "total": b":%d" % (f.prompt_tokens + f.completion_tokens),
            "cached": b":%d" % f.timing.cached_tokens,
            "reasoning": b":%d" % f.reasoning_tokens,
            "time": b":%d" % int(time.time()),
            **{f"seq{i}": b":%d" % (seq + i) for i in range(4)},
        }
        return [(t.type, t.render(values)) for t in self.cut]


def _slots(reason: str) -> tuple[tuple[str, ...], ...]:
    last = _PER_EVENT[3] + (("time",) if FINAL_STATUS[reason] == "completed" else ())
    return (*_PER_EVENT[:3], last)


def _marked(snapshot: Response, item_id: str, reason: str) -> list[Event]:
    """The tail's four events for a Task final of `reason`, every slot holding its marker."""
    timing = TaskTiming(0, cached_tokens=_CACHED)
    final = FinalEvent("", reason, _INPUT, _OUTPUT, TEXT, [], timing, reasoning_tokens=_REASONING)
    resp = snapshot.finished(final, item_id, TEXT)
    if resp.completed_at is not None:
        resp.completed_at = _TIME
    events = done_events(resp, TEXT, item_id) + terminal_events(final, resp)
    for i, e in enumerate(events):
        e.sequence_number = _SEQ + i
    return events
