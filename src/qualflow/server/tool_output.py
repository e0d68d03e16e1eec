"""A response's answer with function tools: the Task's tool-call parser events (message text, and
per call its start, name, argument pieces, then done or invalid) -> output items and the stream
events that build them. Text is a message item (a new one after a call); each call is a
`function_call` item at the next `output_index`: `output_item.added` (in_progress, arguments ""),
`function_call_arguments.delta` per piece as generated, `.done` (arguments, name), then
`output_item.done` (completed); no content parts. A call cut short (by `max_output_tokens`) or
written outside the format ends `incomplete` with what it had streamed, its `.done` and
`output_item.done` sent as a cut message's `output_text.done` is (a call cut before its name is
dropped). The markers never reach
the text. The streamed and the non-streamed response are built by the same code."""

from __future__ import annotations

from qualflow.runtime import CallArguments, CallDone, CallInvalid, CallName, ToolText

from .protocol.events import (
    CallArgumentsDelta,
    CallArgumentsDone,
    ContentPartEvent,
    Event,
    OutputItemEvent,
    TextDelta,
    TextDoneEvent,
)
from .protocol.responses import FunctionCallItem, OutputMessage, OutputText, new_id


class ToolOutput:
    def __init__(self, parser, first_index: int = 0, message_id: str | None = None):
        """`parser`: the Task's ToolCallParser for this request; `first_index`: the output_index
        of the first item (1 after a reasoning item); `message_id`: the first message's id."""
        self.parser = parser
        self.items: list = []  # the finished items, in output order
        self.next_index = first_index
        self._message_id = message_id
        self._text: list[str] | None = None  # the open message's text pieces
        self._msg: tuple[str, int] | None = None  # its (id, output_index)
        self._calls: dict[int, tuple[FunctionCallItem, int, list[str]]] = {}

    @property
    def calls(self) -> int:
        """Function calls completed so far."""
        return sum(1 for i in self.items if isinstance(i, FunctionCallItem))

    def push(self, text: str) -> list:
        return self._events(self.parser.push(text)) if text else []

    def finish(self, status: str) -> list:
        """The remaining events at the end (`status`: completed or incomplete, for what is open);
        a response with no item gets an empty message."""
        out = self._events(self.parser.finish())
        for index in list(self._calls):
            out += self._call_done(index, None, "incomplete")
        if self._msg is None and not self.items:
            out += self._open_message()
        out += self._close_message(status)
        return out

    # ---- events ---------------------------------------------------------------------------------
    def _events(self, parsed: list) -> list:
        out: list = []
        for ev in parsed:
            if isinstance(ev, ToolText):
                if self._msg is None:
                    out += self._open_message()
                self._text.append(ev.text)
                out.append(TextDelta(0, self._msg[0], ev.text, self._msg[1]))
            elif isinstance(ev, CallName):
                out += self._close_message("completed") + self._call_added(ev.index, ev.name)
            elif isinstance(ev, CallArguments) and ev.index in self._calls:
                item, index, pieces = self._calls[ev.index]
                pieces.append(ev.delta)
                out.append(CallArgumentsDelta(item_id=item.id, output_index=index, delta=ev.delta))
            elif isinstance(ev, CallDone):
                out += self._call_done(ev.index, ev, "completed")
            elif isinstance(ev, CallInvalid):
                out += self._call_done(ev.index, None, "incomplete")
        return out

    def _open_message(self) -> list[Event]:
        mid = self._message_id or new_id("msg")
        self._message_id = None
        self._msg, self._text = (mid, self.next_index), []
        self.next_index += 1
        at = dict(output_index=self._msg[1])
        return [
            OutputItemEvent(
                type="response.output_item.added", item=OutputMessage.of(mid, None), **at
            ),
            ContentPartEvent(
                type="response.content_part.added", part=OutputText(), item_id=mid, **at
            ),
        ]

    def _close_message(self, status: str) -> list[Event]:
        if self._msg is None:
            return []
        (mid, index), text = self._msg, "".join(self._text)
        self._msg = self._text = None
        item = OutputMessage.of(mid, text, status)
        self.items.append(item)
        at = dict(item_id=mid, output_index=index)
        return [
            TextDoneEvent(text=text, **at),
            ContentPartEvent(type="response.content_part.done", part=OutputText(text=text), **at),
            OutputItemEvent(type="response.output_item.done", item=item, output_index=index),
        ]

    def _call_added(self, call: int, name: str) -> list[Event]:
        item = FunctionCallItem(id=new_id("fc"), call_id=new_id("call"), name=name)
        self._calls[call] = (item, self.next_index, [])
        self.next_index += 1
        added = item.model_copy()
        return [
            OutputItemEvent(
                type="response.output_item.added", item=added, output_index=self.next_index - 1
            )
        ]

    def _call_done(self, call: int, done: CallDone | None, status: str) -> list[Event]:
        if call not in self._calls:
            return []
        item, index, pieces = self._calls.pop(call)
        arguments = done.arguments if done is not None else "".join(pieces)
        item = item.model_copy(update={"arguments": arguments, "status": status})
        self.items.append(item)
        return [
            CallArgumentsDone(
                item_id=item.id, output_index=index, name=item.name, arguments=arguments
            ),
            OutputItemEvent(type="response.output_item.done", item=item, output_index=index),
        ]
