"""Terminal events of AIPerf's requests, read from `profile_export_raw.jsonl` (`--export-level
raw`).

AIPerf 0.13 ignores `response.completed`, `response.incomplete` and `response.failed`: a stream that
was cut off, failed after some deltas, or never sent its terminal event is recorded as a success
with a short OSL. Without server records that is the only place such a
failure can be seen, so every request's terminal event is checked here:

- streamed: the last event must be `response.completed`, or `response.incomplete` with
  `incomplete_details.reason == "max_output_tokens"` (cut at the requested length: expected);
- not streamed: the body's `status` must be `completed` (or `incomplete` for max_output_tokens).

Anything else (response.failed, an error event, no terminal event, an unparsable body) is an
error."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

RAW = "profile_export_raw.jsonl"
TERMINAL = ("response.completed", "response.incomplete", "response.failed")


@dataclass(frozen=True)
class Terminal:
    event: str | None  # the terminal event type (streamed) or "body:<status>" (not streamed)
    error: str | None  # why it does not count as a complete response; None when it does


def _judge_response(kind: str, resp: dict | None) -> str | None:
    status = (resp or {}).get("status")
    if kind == "response.completed" and status in (None, "completed"):
        return None
    if kind == "response.incomplete" or status == "incomplete":
        reason = ((resp or {}).get("incomplete_details") or {}).get("reason")
        return None if reason == "max_output_tokens" else f"response incomplete (reason {reason!r})"
    if kind == "response.failed" or status == "failed":
        return f"response failed: {json.dumps((resp or {}).get('error'))[:300]}"
    return f"terminal status {status!r}"


def _events(record: dict) -> list[tuple[str | None, dict | None]]:
    """(event type, parsed data) of every SSE message; the type from the `event:` line or the
    data's `type`."""
    out = []
    for r in record.get("responses") or []:
        packets = r.get("packets")
        if packets is None:
            continue
        name, data = None, None
        for p in packets:
            if p.get("name") == "event":
                name = p.get("value")
            elif p.get("name") == "data":
                try:
                    data = json.loads(p.get("value") or "null")
                except ValueError:
                    data = {"_unparsable": p.get("value")}
        if isinstance(data, dict):
            name = name or data.get("type")
        out.append((name, data if isinstance(data, dict) else None))
    return out


def terminal_of(record: dict) -> Terminal:
    if record.get("error"):
        return Terminal(None, None)  # already an error record; AIPerf counts it
    events = _events(record)
    if events:
        last, data = events[-1]
        if last not in TERMINAL:
            return Terminal(last, f"stream ended without a terminal event (last event {last!r})")
        return Terminal(last, _judge_response(last, (data or {}).get("response")))
    bodies = [r.get("text") for r in record.get("responses") or [] if r.get("text") is not None]
    if not bodies:
        return Terminal(None, "no response body or events")
    try:
        body = json.loads("".join(bodies))
    except ValueError:
        return Terminal(None, "response body is not JSON")
    status = body.get("status") if isinstance(body, dict) else None
    kind = {"completed": "response.completed", "incomplete": "response.incomplete"}.get(
        status, "response.failed"
    )
    return Terminal(
        f"body:{status}", _judge_response(kind, body if isinstance(body, dict) else None)
    )


def read_terminals(artifact_dir: str | Path) -> dict[str, Terminal] | None:
    """request id -> Terminal, or None when the run has no raw export (terminal events not
    checked)."""
    path = Path(artifact_dir) / RAW
    if not path.exists():
        return None
    out = {}
    for line in path.read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a truncated last line: its record is missing from the jsonl too
        rid = (rec.get("metadata") or {}).get("x_request_id")
        if rid:
            out[rid] = terminal_of(rec)
    return out
