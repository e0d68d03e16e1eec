"""The session's reruns of a point beside its own figures: the harness ceiling (evidence.ceiling)
and the cache-off rerun (evidence.cache_off). Neither becomes rows, statuses or SLO figures of the
point: each adds its columns to the point's summary rows and its commands to `runs.commands`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from qualflow.aiperf.command import AiperfPoint
from qualflow.evidence.cache_off import (
    CacheOff,
    cache_off_columns,
    cache_off_failure,
    read_cache_offs,
)
from qualflow.evidence.ceiling import Ceiling, ceiling_columns, ceiling_failure, read_ceilings
from qualflow.session.records import CacheOffRecord, CeilingRecord, SessionRecord, reached


@dataclass(frozen=True)
class Reruns:
    """The session's rerun records and each point's runs in them, by point id."""

    ceiling: CeilingRecord | None
    ceilings: Mapping[str, Ceiling]
    cache_off: CacheOffRecord | None
    cache_offs: Mapping[str, CacheOff]

    @classmethod
    def read(cls, session_dir: str | Path, session: SessionRecord) -> Reruns:
        ceiling, cache_off = reached(session.ceiling), reached(session.cache_off)
        return cls(
            ceiling,
            read_ceilings(session_dir, ceiling),
            cache_off,
            read_cache_offs(session_dir, cache_off),
        )

    def columns(self, p: AiperfPoint, output_tps: float | None) -> dict:
        """The summary columns the point's reruns add (none where it asked for none)."""
        out = {}
        if p.harness_ceiling:
            failure = ceiling_failure(self.ceiling)
            out.update(ceiling_columns(self.ceilings.get(p.point_id), output_tps, failure))
        if p.cache_off_rerun:
            failure = cache_off_failure(self.cache_off)
            out.update(cache_off_columns(self.cache_offs.get(p.point_id), failure))
        return out

    def commands(self, p: AiperfPoint) -> dict:
        """The servers' and AIPerf's commands of the point's reruns, for `runs.commands`."""
        out = {}
        ceiling = self.ceilings.get(p.point_id) if p.harness_ceiling else None
        if ceiling is not None:
            out["ceiling_server"] = self.ceiling.server_command if self.ceiling else None
            out["ceiling_aiperf"] = ceiling.command
        cache_off = self.cache_offs.get(p.point_id) if p.cache_off_rerun else None
        if cache_off is not None:
            out["cache_off_server"] = self.cache_off.server_command if self.cache_off else None
            out["cache_off_aiperf"] = cache_off.command
        return out
