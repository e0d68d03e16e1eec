"""The answer text of a request with function tools, parsed as it is generated (pure: text in,
events out, api/tool_calls.py). The format is the family's tool-call spec (`ToolCallSpec`: the
open and close markers, a JSON payload {"name": …, "arguments": {…}}).

Text outside calls is message text; the markers never are, nor the whitespace that separates a
call from the text around it or from the next call. A call's name is reported once its payload
has it, its arguments as they are generated (the JSON text of the arguments value, never held to
the end), then the call is done when its close marker arrives, or invalid (a typed event with the
reason) when its payload is not the format. A call the output ends inside is done if its payload
is complete, else invalid. With thinking on, this parser takes the answer text (after the think
block, frontend/reasoning.py)."""

from __future__ import annotations

import json
import re

from ..api.tool_calls import CallArguments, CallDone, CallInvalid, CallName, CallStarted, ToolText


def held_prefix(text: str, marker: str) -> int:
    """Length of the longest end of `text` that is a proper beginning of `marker` (held back: the
    next piece may complete the marker)."""
    for n in range(min(len(text), len(marker) - 1), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0


class ValueEnd:
    """Where one JSON value ends in a stream of characters (objects, arrays, strings, scalars)."""

    def __init__(self):
        self.started = self.done = self.in_string = self.escaped = self.bare = False
        self.depth = 0

    def feed(self, text: str) -> tuple[int, str]:
        """(characters of `text` read, those that are the value's); stops at the value's end."""
        start = None
        for i, ch in enumerate(text):
            if not self.started:
                if ch.isspace():
                    continue
                self.started, start = True, i
                self.depth, self.in_string, self.bare = int(ch in "{["), ch == '"', ch not in '{["'
                continue
            start = i if start is None else start
            if self._ends_before(ch):
                self.done = True
                return i, text[start:i]
            if self._ends_after(ch):
                self.done = True
                return i + 1, text[start : i + 1]
        return len(text), "" if start is None else text[start:]

    def _ends_before(self, ch: str) -> bool:
        return self.bare and (ch in ",}]" or ch.isspace())

    def _ends_after(self, ch: str) -> bool:
        if self.bare:
            return False
        if self.in_string:
            if self.escaped:
                self.escaped = False
            elif ch == "\\":
                self.escaped = True
            elif ch == '"':
                self.in_string = False
                return self.depth == 0
            return False
        if ch == '"':
            self.in_string = True
        elif ch in "{[":
            self.depth += 1
        elif ch in "}]":
            self.depth -= 1
            return self.depth == 0
        return False


class _Call:
    def __init__(self, index: int):
        self.index = index
        self.phase = "head"  # head (before the arguments) -> args -> tail (after them)
        self.scanned = 0  # characters of the body read so far
        self.name: str | None = None
        self.value = ValueEnd()
        self.args: list[str] = []  # the argument pieces reported


class ToolCallParser:
    def __init__(self, spec):
        self.open, self.close = spec.open, spec.close
        self.name_key, self.args_key = spec.name_key, spec.arguments_key
        name, args = re.escape(spec.name_key), re.escape(spec.arguments_key)
        self._head = re.compile(rf'\s*\{{\s*"{name}"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"{args}"\s*:')
        self._pending = ""  # text not yet reported (or the open call's body)
        self._call: _Call | None = None
        self._after_call = False  # the next text's leading whitespace separates it from a call
        self.calls = 0

    def push(self, text: str) -> list:
        """Events for the next piece of answer text."""
        self._pending += text
        events: list = []
        while (
            self._text_step(events) if self._call is None else self._call_step(events, final=False)
        ):
            pass
        return events

    def finish(self) -> list:
        """Events at the end of the output: the held-back text, or the call it ends inside."""
        events = self.push("")
        if self._call is not None:
            self._call_step(events, final=True)
        text, self._pending = self._pending, ""
        self._emit_text(events, text, before_call=False)
        return events

    # ---- text outside calls ---------------------------------------------------------------------
    def _text_step(self, events: list) -> bool:
        buf = self._pending
        at = buf.find(self.open)
        if at >= 0:
            self._emit_text(events, buf[:at], before_call=True)
            self._pending = buf[at + len(self.open) :]
            self._call = _Call(self.calls)
            self.calls += 1
            events.append(CallStarted(self._call.index))
            return True
        stable = buf[: len(buf) - held_prefix(buf, self.open)]
        said = stable.rstrip()  # trailing whitespace waits: it may separate text from a call
        self._emit_text(events, said, before_call=False)
        self._pending = buf[len(said) :]
        return False

    def _emit_text(self, events: list, text: str, before_call: bool) -> None:
        if self._after_call:
            text = text.lstrip()
            self._after_call = not text
        if before_call:
            text = text.rstrip()
        if text:
            events.append(ToolText(text))

    # ---- a call ---------------------------------------------------------------------------------
    def _call_step(self, events: list, final: bool) -> bool:
        call, body = self._call, self._pending
        at = body.find(self.close)
        limit = at if at >= 0 else len(body) if final else len(body) - held_prefix(body, self.close)
        self._advance(call, body[:limit], events)
        if at < 0 and not final:
            return False
        self._done(call, body[:limit], events, closed=at >= 0)
        self._pending = body[at + len(self.close) :] if at >= 0 else ""
        self._call, self._after_call = None, True
        return True

    def _advance(self, call: _Call, visible: str, events: list) -> None:
        if call.phase == "head":
            m = self._head.match(visible)
            if m is None:
                return
            try:
                call.name = json.loads(f'"{m.group(1)}"')
            except ValueError:
                call.phase = "broken"
                return
            events.append(CallName(call.index, call.name))
            call.phase, call.scanned = "args", m.end()
        if call.phase == "args":
            read, part = call.value.feed(visible[call.scanned :])
            call.scanned += read
            if part:
                call.args.append(part)
                events.append(CallArguments(call.index, part))
            if call.value.done:
                call.phase = "tail"

    def _done(self, call: _Call, raw: str, events: list, closed: bool) -> None:
        payload, reason = self._payload(raw)
        if reason is not None:
            why = reason if closed else f"the output ended inside the call ({reason})"
            events.append(CallInvalid(call.index, why, raw))
            return
        args = payload[self.args_key]
        name = payload[self.name_key] if call.name is None else call.name
        if call.name is None:
            events.append(CallName(call.index, name))
        if call.phase in ("args", "tail") and call.args:
            text = "".join(call.args)
        else:  # the payload had no streamable head (keys in another order)
            text = json.dumps(args, ensure_ascii=False)
            events.append(CallArguments(call.index, text))
        events.append(CallDone(call.index, name, text))

    def _payload(self, raw: str) -> tuple[dict | None, str | None]:
        try:
            obj = json.loads(raw)
        except ValueError as e:
            return None, f"the call's payload is not valid JSON: {e}"
        keys = {self.name_key, self.args_key}
        if not isinstance(obj, dict) or set(obj) != keys:
            return (
                None,
                f"the call's payload must be a JSON object with exactly the keys {sorted(keys)}",
            )
        if not isinstance(obj[self.name_key], str) or not obj[self.name_key]:
            return None, f"the call's {self.name_key!r} must be a non-empty string"
        if not isinstance(obj[self.args_key], dict):
            return None, f"the call's {self.args_key!r} must be a JSON object"
        return obj, None
