"""What a request with function tools yields as its answer text is parsed (frontend/tool_calls.py):
message text outside calls, and per call (`index`: its place among the response's calls) its start,
its name, its arguments as they are generated, then the call done, or invalid."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolText:
    """Message text outside any call (the markers are never in it)."""

    text: str


@dataclass(frozen=True)
class CallStarted:
    index: int


@dataclass(frozen=True)
class CallName:
    index: int
    name: str


@dataclass(frozen=True)
class CallArguments:
    """The next piece of a call's arguments (JSON text, as generated)."""

    index: int
    delta: str


@dataclass(frozen=True)
class CallDone:
    """A complete, valid call; `arguments`: the JSON text of the arguments object (the deltas
    joined)."""

    index: int
    name: str
    arguments: str


@dataclass(frozen=True)
class CallInvalid:
    """A call whose payload is not the family's format (`raw`: what the model wrote between the
    markers)."""

    index: int
    reason: str
    raw: str


ToolEvent = ToolText | CallStarted | CallName | CallArguments | CallDone | CallInvalid
