"""The phase-tag vocabulary: which stage of a serving session sent a request.

Every client of the session's server sends `PHASE_HEADER: <tag>`; the server records the tag with
the request's timing record, and the evidence join reads it back with `parse_tag`. A leaf module: it
imports nothing from qualflow."""
from __future__ import annotations

PHASE_HEADER = "X-Qualflow-Phase"
WARMUP = "warmup"
PROTOCOL = "protocol"
PROFILING = "profiling"   # the evidence's phase name for AIPerf's measured requests
AIPERF_PREFIX = "aiperf:"


def aiperf_tag(point_id: str) -> str:
    return f"{AIPERF_PREFIX}{point_id}"


def parse_tag(tag: str | None) -> tuple[str | None, str | None]:
    """(phase, point_id) of a tag: warmup/protocol -> (tag, None); aiperf:<point> -> (profiling,
    point); anything else (no header, a hand-made request) -> (None, None)."""
    if tag in (WARMUP, PROTOCOL):
        return tag, None
    if tag and tag.startswith(AIPERF_PREFIX):
        return PROFILING, tag[len(AIPERF_PREFIX):]
    return None, None
