"""Per-request Task timing records: one per HTTP request (rejected ones included), keyed by the
X-Request-ID, kept in a bounded in-memory store and optionally appended to a JSONL file once final.

All times are wall-clock epoch ns (time.time_ns()), the clock AIPerf's metadata uses.
"""
from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

TASK_FIELDS = ("submitted_ns", "first_scheduled_ns", "first_token_ns", "finished_ns", "queue_wait_ns",
               "prefill_ns", "decode_ns", "public_task_call_wall_ns")


def new_record(request_id: str, response_id: str, tag: str | None, stream: bool | None,
               received_ns: int) -> dict:
    return {"request_id": request_id, "response_id": response_id, "tag": tag, "stream": stream,
            "status": "in_progress", "http_status": None, "finish_reason": None, "error": None,
            "input_tokens": None, "output_tokens": None,
            "http_received_ns": received_ns, "http_sent_ns": None, **dict.fromkeys(TASK_FIELDS)}


class TimingStore:
    def __init__(self, max_records: int = 200_000, log_path: str | Path | None = None):
        self.max_records = max_records
        self._records: OrderedDict[str, dict] = OrderedDict()   # response_id -> record
        self._log = open(log_path, "a", buffering=1) if log_path else None

    def add(self, record: dict) -> dict:
        self._records[record["response_id"]] = record
        while len(self._records) > self.max_records:
            self._records.popitem(last=False)
        return record

    def finish(self, record: dict, sent_ns: int) -> None:
        """Mark a record final (last byte handed to the transport) and append it to the log."""
        record["http_sent_ns"] = sent_ns
        if self._log is not None:
            self._log.write(json.dumps(record) + "\n")

    def query(self, request_ids: set[str] | None = None, since_ns: int | None = None,
              tag: str | None = None) -> list[dict]:
        return [r for r in self._records.values()
                if (request_ids is None or r["request_id"] in request_ids)
                and (since_ns is None or r["http_received_ns"] >= since_ns)
                and (tag is None or r["tag"] == tag)]

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
