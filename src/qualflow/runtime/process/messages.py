"""What crosses the process boundary between an API process (process.core, process.core_client) and
the engine process (process.core; process.core_hub where several API processes share it, one pipe
pair each): one pickled object per send over two one-way multiprocessing pipes.
  API -> engine: Submit | Cancel | Score | Stop
  engine -> API: Loaded | LoadFailed (the first message), then Step (one per engine step: every
                 request's new tokens and the requests that ended), Scored, Failed, Closed
Frozen dataclasses with slots; each pickles as its class and its field values in order (`_Message`),
as small as the tuple it replaces. `send` and `recv` are the one way they cross a pipe: the standard
pickle over `send_bytes` / `recv_bytes`, not the Connection's own `send`, whose ForkingPickler
copies its whole reducer table (torch registers about 80 reducers in it) at every dump, many times
the cost of pickling a one-token Step. No message holds what only ForkingPickler can carry (tensors
in shared memory, handles).

The pipe ends of one link between an API process and an engine process it shares with the other
API processes (`qualflow serve --api-server-count N`), as core_hub.EngineHost hands them out: the
API side's (`LinkEnds`, to core_client.AttachedEngine) and the engine side's (`EngineEnds`, to
core_hub.main). Passed to the spawned processes as their arguments (a Connection pickles only
while a process is being spawned)."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any

from ..api.events import FinishReason
from ..api.request import GenerationRequest


def send(conn, msg: _Message) -> None:
    """One message over `conn` (raises what `send_bytes` raises: OSError, ValueError once
    closed)."""
    conn.send_bytes(pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL))


def recv(conn) -> _Message:
    """The next message from `conn` (raises EOFError once the other end is closed, as `recv`
    does)."""
    return pickle.loads(conn.recv_bytes())


class _Message:
    """Pickled as (class, field values): no per-message field names, no __setstate__ call."""

    __slots__ = ()

    def __reduce__(self):
        return type(self), tuple(getattr(self, name) for name in self.__slots__)


# ---- parent -> child -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Submit(_Message):
    key: int  # the proxy's key of the request (request ids may repeat)
    request: GenerationRequest
    submitted_ns: int  # stamped at the Task call, in the parent


@dataclass(frozen=True, slots=True)
class Cancel(_Message):
    request_id: str


@dataclass(frozen=True, slots=True)
class Score(_Message):
    call: int
    token_ids: list[int]


@dataclass(frozen=True, slots=True)
class Stop(_Message):
    """Close the engine (open requests end as cancelled), answer Closed, exit."""


# ---- child -> parent -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Loaded(_Message):
    load_timing: dict
    info: dict


@dataclass(frozen=True, slots=True)
class LoadFailed(_Message):
    why: str
    input_error: bool = (
        False  # the bundle is missing, tampered or invalid (the loader's ValueError)
    )


@dataclass(frozen=True, slots=True)
class Finished(_Message):
    """One request's end, with the engine-side stamps of its timing."""

    key: int
    reason: FinishReason
    error: str | None
    first_scheduled_ns: int | None
    first_token_ns: int | None
    finished_ns: int | None
    answer_first_token_ns: int | None = (
        None  # thinking on: when the first token after the think block came
    )
    cached_tokens: int = 0  # prompt tokens served from the prefix cache (TaskTiming)


@dataclass(frozen=True, slots=True)
class Step(_Message):
    """One engine step: new token ids per request key (in the order they were sampled), then the
    requests that ended in it."""

    tokens: dict[int, list[int]] = field(default_factory=dict)
    finals: list[Finished] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Scored(_Message):
    call: int
    logits: Any = None  # numpy float32 [T, V]; None when the call failed
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Failed(_Message):
    """The engine thread died: why. The child exits right after."""

    why: str


@dataclass(frozen=True, slots=True)
class Closed(_Message):
    """The engine closed after Stop; the child exits."""


@dataclass(frozen=True)
class LinkEnds:
    to_engine: Any  # multiprocessing Connection: Submit | Cancel | Score | Stop
    from_engine: (
        Any  # multiprocessing Connection: Loaded | LoadFailed, Step, Scored, Failed, Closed
    )
    engine_pid: int


@dataclass(frozen=True)
class EngineEnds:
    from_api: Any
    to_api: Any
