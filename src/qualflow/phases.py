"""The phase-tag vocabulary: which stage of a serving session sent a request.

Every client of the session's server sends `PHASE_HEADER: <tag>`; the server records the tag with
the request's timing record, and the evidence join reads it back with `parse_tag`. A leaf module: it
imports nothing from qualflow."""

from __future__ import annotations

PHASE_HEADER = "X-Qualflow-Phase"
WARMUP = "warmup"
PROTOCOL = "protocol"
PROFILING = "profiling"  # the evidence's phase name for AIPerf's measured requests
AIPERF_PREFIX = "aiperf:"


REPEAT_MARK = ".r"  # point key of repeat k >= 2: <point_id>.r<k> (load labels never hold a dot)


def point_key(point_id: str, repeat: int = 1) -> str:
    """The name of one AIPerf run of a point: its directory, tag and record key. Repeat 1 is the
    point id itself (so a point without repeats looks as it always did)."""
    return point_id if repeat == 1 else f"{point_id}{REPEAT_MARK}{repeat}"


def parse_point_key(key: str) -> tuple[str, int]:
    """(point_id, repeat) of a point key."""
    head, sep, tail = key.rpartition(REPEAT_MARK)
    if sep and tail.isdigit() and int(tail) >= 2:
        return head, int(tail)
    return key, 1


def aiperf_tag(point_id: str, repeat: int = 1) -> str:
    return f"{AIPERF_PREFIX}{point_key(point_id, repeat)}"


def parse_tag(tag: str | None) -> tuple[str | None, str | None]:
    """(phase, point_id) of a tag: warmup/protocol -> (tag, None); aiperf:<point> -> (profiling,
    point); anything else (no header, a hand-made request) -> (None, None)."""
    if tag in (WARMUP, PROTOCOL):
        return tag, None
    if tag and tag.startswith(AIPERF_PREFIX):
        return PROFILING, tag[len(AIPERF_PREFIX) :]
    return None, None
