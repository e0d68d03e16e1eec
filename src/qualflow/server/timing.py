"""Per-request Task timing records: one per HTTP request (rejected ones included), kept in a bounded
in-memory store and appended to a JSONL file once final. `read_timing_log` is the one reader of
that file (the session waits on it, the evidence join reads it).

Two ids, on purpose: the store and the Task key a request by its response id (`resp_<hex>`, unique,
made by the server); HTTP identity is the client's `X-Request-ID`, which the client chooses and may
repeat. All times are wall-clock epoch ns (time.time_ns()), the clock AIPerf's metadata uses.
"""
from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import asdict, dataclass, fields
from pathlib import Path

TASK_FIELDS = ("submitted_ns", "first_scheduled_ns", "first_token_ns", "finished_ns", "queue_wait_ns",
               "prefill_ns", "decode_ns", "public_task_call_wall_ns")


@dataclass
class TimingRecord:
    request_id: str
    response_id: str
    tag: str | None
    stream: bool | None
    http_received_ns: int
    status: str = "in_progress"   # in_progress -> completed | incomplete | failed | cancelled | rejected
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

    # ---- transitions ------------------------------------------------------------------------
    def reject(self, http_status: int, message: str) -> None:
        """Refused before the Task saw it (4xx)."""
        self.status, self.http_status, self.error = "rejected", http_status, message

    def fail(self, message: str, http_status: int | None = None) -> None:
        """A server-side failure; keeps a final status the Task already gave."""
        if self.status == "in_progress":
            self.status = "failed"
        self.error = message
        self.http_status = http_status if http_status is not None else self.http_status

    def cancel(self) -> None:
        """The client went away before the final event."""
        self.status = "cancelled"

    def finish(self, status: str, finish_reason: str, error: str | None, input_tokens: int,
               output_tokens: int, timing: dict) -> None:
        """The Task's final event: outcome, token counts and its timing (TASK_FIELDS)."""
        self.status, self.finish_reason, self.error = status, finish_reason, error
        self.input_tokens, self.output_tokens = input_tokens, output_tokens
        for k in TASK_FIELDS:
            setattr(self, k, timing.get(k))

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TimingRecord":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


class TimingLogError(ValueError):
    pass


def read_timing_log(path: str | Path, strict: bool = True) -> list[TimingRecord]:
    """Every record of a timing JSONL file, in file order ([] when it does not exist). A line that is
    not a record (the server died while writing it) raises TimingLogError naming the file and line,
    or, with strict=False (a reader polling a log still being written), is skipped."""
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


def new_record(request_id: str, response_id: str, tag: str | None, stream: bool | None,
               received_ns: int) -> TimingRecord:
    return TimingRecord(request_id, response_id, tag, stream, received_ns)


class TimingStore:
    def __init__(self, max_records: int = 200_000, log_path: str | Path | None = None):
        self.max_records = max_records
        self._records: OrderedDict[str, TimingRecord] = OrderedDict()   # response_id -> record
        self._log = open(log_path, "a", buffering=1) if log_path else None

    def add(self, record: TimingRecord) -> TimingRecord:
        self._records[record.response_id] = record
        while len(self._records) > self.max_records:
            self._records.popitem(last=False)
        return record

    def finish(self, record: TimingRecord, sent_ns: int) -> None:
        """Mark a record final (last byte handed to the transport) and append it to the log."""
        record.http_sent_ns = sent_ns
        if self._log is not None:
            self._log.write(json.dumps(record.as_dict()) + "\n")

    def query(self, request_ids: set[str] | None = None, since_ns: int | None = None,
              tag: str | None = None) -> list[dict]:
        """Matching records as JSON-ready dicts, oldest first."""
        return [r.as_dict() for r in self._records.values()
                if (request_ids is None or r.request_id in request_ids)
                and (since_ns is None or r.http_received_ns >= since_ns)
                and (tag is None or r.tag == tag)]

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
