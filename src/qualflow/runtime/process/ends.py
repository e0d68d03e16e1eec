"""The pipe ends of one link between an API process and the engine process it shares with the other
API processes (`qualflow serve --api-server-count N`), as each side is handed them by host.EngineHost:
the API side's (`LinkEnds`, to process.link.AttachedEngine) and the engine side's (`EngineEnds`, to
process.hub). Passed to the spawned processes as their arguments (a Connection pickles only while a
process is being spawned)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LinkEnds:
    to_engine: Any       # multiprocessing Connection: Submit | Cancel | Score | Stop
    from_engine: Any     # multiprocessing Connection: Loaded | LoadFailed, Step, Scored, Failed, Closed
    engine_pid: int


@dataclass(frozen=True)
class EngineEnds:
    from_api: Any
    to_api: Any
