"""Per-request Task timing records: one per HTTP request (rejected ones included), kept in a bounded
in-memory store and appended to a JSONL file once final (by every API process of a server, each
appending whole lines: `append_line`). `read_timing_log` is the one reader of
that file (the session waits on it, the evidence join reads it).

Two ids, on purpose: the store and the Task key a request by its response id (`resp_<hex>`, unique,
made by the server); HTTP identity is the client's `X-Request-ID`, which the client chooses and may
repeat. All times are wall-clock epoch ns (time.time_ns()), the clock AIPerf's metadata uses.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, fields
from pathlib import Path

import orjson

TASK_FIELDS = (
    "submitted_ns",
    "first_scheduled_ns",
    "first_token_ns",
    "finished_ns",
    "queue_wait_ns",
    "prefill_ns",
    "decode_ns",
    "public_task_call_wall_ns",
    "answer_first_token_ns",
    "cached_tokens",
)


@dataclass
class TimingRecord:
    request_id: str
    response_id: str
    tag: str | None
    stream: bool | None
    http_received_ns: int
    status: str = (
        "in_progress"  # in_progress -> completed | incomplete | failed | cancelled | rejected
    )
    http_status: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    http_sent_ns: int | None = None
    submitted_ns: int | None = None
    first_scheduled_ns: int | None = None
    first_token_ns: int | None = None
    finished_ns: int | None = None
    queue_wait_ns: int | None = None
    prefill_ns: int | None = None
    decode_ns: int | None = None
    public_task_call_wall_ns: int | None = None
    # thinking on (None when off): output tokens of the think block (its end token included) and
    # after it, and when the first token after it was produced (None too when no answer token came)
    reasoning_tokens: int | None = None
    answer_tokens: int | None = None
    answer_first_token_ns: int | None = None
    # a stateful request (--store): loading its context, writing the response (None: no store call)
    store_load_ns: int | None = None
    store_write_ns: int | None = None
    tool_calls: int | None = None  # tools offered (None when not): function calls output
    cached_tokens: int | None = None  # prompt tokens the engine's prefix cache served

    # ---- transitions ------------------------------------------------------------------------
    def reject(self, http_status: int, message: str) -> None:
        """Refused before the Task saw it (4xx, or 503 while not ready)."""
        self.status, self.http_status, self.error = "rejected", http_status, _short(message)

    def fail(self, message: str, http_status: int | None = None) -> None:
        """A server-side failure; keeps a final status the Task already gave."""
        if self.status == "in_progress":
            self.status = "failed"
        self.error = _short(message)
        self.http_status = http_status if http_status is not None else self.http_status

    def cancel(self) -> None:
        """The client went away before the final event."""
        self.status = "cancelled"

    def finish(
        self,
        status: str,
        finish_reason: str,
        error: str | None,
        input_tokens: int,
        output_tokens: int,
        timing: dict,
    ) -> None:
        """The Task's final event: outcome, token counts and its timing (TASK_FIELDS)."""
        self.status, self.finish_reason, self.error = status, finish_reason, error
        self.input_tokens, self.output_tokens = input_tokens, output_tokens
        for k in TASK_FIELDS:
            setattr(self, k, timing.get(k))

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in _FIELD_NAMES}

    @classmethod
    def from_dict(cls, d: dict) -> TimingRecord:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


_FIELD_NAMES = tuple(f.name for f in fields(TimingRecord))


def _short(message: str, limit: int = 2000) -> str:
    return (
        message if len(message) <= limit else message[:limit] + f"... ({len(message)} characters)"
    )


class TimingLogError(ValueError):
    pass


def read_timing_log(path: str | Path, strict: bool = True) -> list[TimingRecord]:
    """Every record of a timing JSONL file, in file order ([] when it does not exist). A line
    that is not a record (the server died while writing it) raises TimingLogError naming the file
    and line, or, with strict=False (a reader polling a log still being written), is skipped."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(TimingRecord.from_dict(json.loads(line)))
        except (ValueError, TypeError) as e:
            if strict:
                raise TimingLogError(f"{path}:{n}: not a timing record: {e}") from None
    return out


def new_record(
    request_id: str, response_id: str, tag: str | None, stream: bool | None, received_ns: int
) -> TimingRecord:
    return TimingRecord(request_id, response_id, tag, stream, received_ns)


def _clean(v):
    return v.encode("utf-8", "replace").decode("utf-8") if isinstance(v, str) else v


def dump_record(record: TimingRecord) -> bytes:
    """One record as JSON bytes; a string that is not valid UTF-8 (a lone surrogate) is replaced, so
    one odd record can never make the log or the query endpoint fail."""
    d = record.as_dict()
    try:
        return orjson.dumps(d)
    except TypeError:
        return orjson.dumps({k: _clean(v) for k, v in d.items()})


def append_line(log, line: bytes) -> None:
    """One whole line onto a log opened unbuffered in append mode (O_APPEND): one write(2) call,
    which the kernel appends at the end of the file as one piece, so the lines of several API
    processes appending to one log (`--api-server-count`) never interleave. (A short write, which
    a regular file gives only when its disk is full, is finished with a second call.)"""
    n = log.write(line)
    if n is not None and n < len(line):
        log.write(line[n:])


class TimingStore:
    """Records in arrival order, bounded in count and in bytes (oldest dropped first). A final
    record is kept as its serialized JSON, so queries and the log only join bytes. Paged by an
    integer cursor: each record's position in arrival order (`after`)."""

    LIVE_BYTES = 1024  # what an in-progress record is counted as

    def __init__(
        self,
        max_records: int = 200_000,
        log_path: str | Path | None = None,
        max_bytes: int = 64 << 20,
    ):
        self.max_records, self.max_bytes = max_records, max_bytes
        self._entries: list[list | None] = []  # [record | bytes, request_id, tag, received_ns]
        self._lo = 0  # cursor of _entries[0]
        self._first = 0  # index of the oldest retained entry
        self._pos: dict[str, int] = {}  # response_id -> cursor, for records not yet final
        self._bytes = 0
        self._log = open(log_path, "ab", buffering=0) if log_path else None

    def __len__(self) -> int:
        return len(self._entries) - self._first

    @property
    def nbytes(self) -> int:
        return self._bytes

    def add(self, record: TimingRecord) -> TimingRecord:
        self._pos[record.response_id] = self._lo + len(self._entries)
        self._entries.append([record, record.request_id, record.tag, record.http_received_ns])
        self._bytes += self.LIVE_BYTES
        self._evict()
        return record

    def _evict(self) -> None:
        while len(self) > self.max_records or (self._bytes > self.max_bytes and len(self) > 1):
            e = self._entries[self._first]
            self._entries[self._first] = None
            self._first += 1
            if isinstance(e[0], bytes):
                self._bytes -= len(e[0])
            else:
                self._bytes -= self.LIVE_BYTES
                self._pos.pop(e[0].response_id, None)
        if self._first > 1024 and self._first > len(self._entries) // 2:
            del self._entries[: self._first]
            self._lo += self._first
            self._first = 0

    def finish(self, record: TimingRecord, sent_ns: int) -> None:
        """Mark a record final (last byte handed to the transport) and append it to the log."""
        record.http_sent_ns = sent_ns
        data = dump_record(record)
        at = self._pos.pop(record.response_id, None)
        if at is not None and (e := self._entries[at - self._lo]) is not None:
            e[0] = data
            self._bytes += len(data) - self.LIVE_BYTES
            self._evict()
        if (
            self._log is not None
        ):  # the log keeps json's own layout (ASCII, escapes for anything odd)
            append_line(self._log, json.dumps(record.as_dict()).encode() + b"\n")

    def page(
        self,
        request_ids: set[str] | None = None,
        since_ns: int | None = None,
        tag: str | None = None,
        after: int = -1,
        limit: int | None = None,
    ) -> tuple[list[bytes], int, bool]:
        """Matching records as JSON bytes, oldest first, from cursor `after` (exclusive):
        (records, cursor of the last one looked at, whether more may match)."""
        out, cursor = [], after
        # at most the end: a cursor past it (up to 2**63 - 1) is an empty page, not an overflow
        start = min(max(after + 1 - self._lo, self._first), len(self._entries))
        if since_ns is not None:  # arrival order is receive-time order
            start = bisect.bisect_left(
                self._entries, since_ns, lo=start, key=lambda e: -1 if e is None else e[3]
            )
        for i in range(start, len(self._entries)):
            if limit is not None and len(out) >= limit:
                return out, cursor, True
            e, cursor = self._entries[i], self._lo + i
            if (
                e is None
                or (request_ids is not None and e[1] not in request_ids)
                or (tag is not None and e[2] != tag)
            ):
                continue
            out.append(e[0] if isinstance(e[0], bytes) else dump_record(e[0]))
        return out, cursor, False

    def query(
        self,
        request_ids: set[str] | None = None,
        since_ns: int | None = None,
        tag: str | None = None,
    ) -> list[dict]:
        """Every matching record as a dict, oldest first."""
        return [orjson.loads(b) for b in self.page(request_ids, since_ns, tag)[0]]

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
