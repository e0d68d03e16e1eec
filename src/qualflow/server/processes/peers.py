"""What one API process of a server with several (`qualflow serve --api-server-count N`,
api_servers) shares with the others: admission (one semaphore, admission.SharedAdmission) and
readiness (a counter of the processes whose Task is attached), so /health says `ok` only once
every process can serve: a client that waits for it never meets a process still loading."""

from __future__ import annotations

import os
import sys
from typing import Any

from ..admission import SharedAdmission


class Peers:
    def __init__(self, index: int, count: int, admission: SharedAdmission, ready: Any):
        """This is API process `index` of `count`. `ready`: a multiprocessing Semaphore starting
        at 0 that each process releases once ready."""
        self.index, self.count, self.admission, self._ready = index, count, admission, ready

    def mark_ready(self) -> None:
        self._ready.release()

    def all_ready(self) -> bool:
        return self._ready.get_value() >= self.count

    def closing(self) -> None:
        """At shutdown, on stderr: how many requests this process admitted (how the kernel spread
        the connections over the processes)."""
        print(
            f"qualflow serve: API process {self.index} (pid {os.getpid()}) admitted "
            f"{self.admission.admitted} requests",
            file=sys.stderr,
            flush=True,
        )
