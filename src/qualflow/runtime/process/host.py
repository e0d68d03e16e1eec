"""The parent side of an engine process shared by several API processes (`qualflow serve
--api-server-count N`): `EngineHost` makes one link (two one-way pipes) per API process, starts the
engine process (process.hub) with the engine's ends, and hands API process i `links[i]` (its
LinkEnds, for process.link.AttachedEngine). Once the API processes are started, `release_links`
closes this process's copies, so that each side's death reads as EOF on the other's link."""
from __future__ import annotations

import multiprocessing
import os
from typing import Callable

from ..config import EngineConfig
from .ends import EngineEnds, LinkEnds

STOP_TIMEOUT_S = 45.0   # the engine closes once every API process detached (each waits up to 30 s)


class EngineHost:
    def __init__(self, load: Callable, bundle_dir: str, cfg: EngineConfig, api_processes: int):
        """`load(bundle_dir, cfg)`: a module-level function (pickled by name) that builds the Task
        whose engine the engine process runs."""
        from . import hub
        ctx = multiprocessing.get_context("spawn")
        engine_ends, api_ends = [], []
        for _ in range(api_processes):
            from_api, to_engine = ctx.Pipe(duplex=False)
            from_engine, to_api = ctx.Pipe(duplex=False)
            engine_ends.append(EngineEnds(from_api, to_api))
            api_ends.append((to_engine, from_engine))
        self.proc = ctx.Process(target=hub.main, name="qualflow-engine", daemon=True,
                                args=(engine_ends, load, str(bundle_dir), cfg, os.getpid()))
        self.proc.start()
        self.pid = self.proc.pid
        for e in engine_ends:
            e.from_api.close()
            e.to_api.close()
        self.links = [LinkEnds(to_engine, from_engine, self.pid) for to_engine, from_engine in api_ends]

    def release_links(self) -> None:
        """The API processes hold their ends now: close ours."""
        for link in self.links:
            link.to_engine.close()
            link.from_engine.close()

    def exit_reason(self) -> str:
        code = self.proc.exitcode
        how = "is running" if code is None else \
            (f"was killed by signal {-code}" if code < 0 else f"exited with code {code}")
        return f"the engine process (pid {self.pid}) {how}"

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Wait for the engine process to exit (it does once every API process detached); kill it
        after `timeout_s`."""
        self.proc.join(timeout=timeout_s)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
