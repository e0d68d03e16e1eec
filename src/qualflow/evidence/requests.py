"""The request-level join of AIPerf client records with the server's Task timing records: every
client record and every server record ends up in exactly one `requests` row (matched, client-only
or server-only)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from qualflow.aiperf import exports
from qualflow.aiperf.command import AiperfPoint
from qualflow.aiperf.terminal import Terminal, read_terminals
from qualflow.evidence.cache import cached_tokens_by_request, max_cached_shares
from qualflow.evidence.schema import TABLES, conform
from qualflow.phases import PROFILING, PROTOCOL, WARMUP, parse_point_key, parse_tag, point_key
from qualflow.server.timing import TimingRecord, read_timing_log
from qualflow.session.records import repeat_run_id

NS_MS = 1e6
# the thinking columns read from either side's records, and the server's tool call count (null
# where a record has none)
THINKING_COLUMNS = (
    "client_ttfot_ms",
    "client_reasoning_tokens",
    "server_reasoning_tokens",
    "server_answer_tokens",
    "server_answer_first_token_ns",
    "server_tool_calls",
)


def _ms(v):
    return None if v is None or (isinstance(v, float) and np.isnan(v)) else v / NS_MS


def _server_cols(s: TimingRecord | None) -> dict:
    if not s:
        return {}
    return {
        "server_response_id": s.response_id,
        "server_tag": s.tag,
        "server_status": s.status,
        "server_http_status": s.http_status,
        "server_error": s.error,
        "server_stream": s.stream,
        "finish_reason": s.finish_reason,
        "server_input_tokens": s.input_tokens,
        "server_output_tokens": s.output_tokens,
        "server_http_received_ns": s.http_received_ns,
        "server_http_sent_ns": s.http_sent_ns,
        "server_submitted_ns": s.submitted_ns,
        "server_first_scheduled_ns": s.first_scheduled_ns,
        "server_first_token_ns": s.first_token_ns,
        "server_finished_ns": s.finished_ns,
        "server_queue_wait_ms": _ms(s.queue_wait_ns),
        "server_prefill_ms": _ms(s.prefill_ns),
        "server_decode_ms": _ms(s.decode_ns),
        "public_task_call_wall_ms": _ms(s.public_task_call_wall_ns),
        "server_reasoning_tokens": s.reasoning_tokens,
        "server_answer_tokens": s.answer_tokens,
        "server_answer_first_token_ns": s.answer_first_token_ns,
        "server_tool_calls": s.tool_calls,
    }


_SOURCE = {PROFILING: "aiperf", WARMUP: "session-warmup", PROTOCOL: "protocol-check"}


def _phase_of_tag(tag: str | None) -> tuple[str, str | None, str]:
    """(phase, point_id, source) for a server-only record."""
    phase, point = parse_tag(tag)
    return (phase, point, _SOURCE[phase]) if phase else ("unknown", None, "unknown")


def match(client_rows: list[dict], server_records: list[TimingRecord]) -> list[dict]:
    """Outer join on request id in which every record of either side is in exactly one row. Client
    and server records of one id pair up in order (matched); what is left over stands alone
    (client-only / server-only). Every row of an id that has more than one record on a side is
    flagged `duplicate_request_id`, which fails accounting for its point."""
    servers: dict[str, list[TimingRecord]] = {}
    for s in server_records:
        servers.setdefault(s.request_id, []).append(s)
    n_client: dict[str, int] = {}
    for c in client_rows:
        n_client[c["request_id"]] = n_client.get(c["request_id"], 0) + 1
    dup = {rid for rid, n in n_client.items() if n > 1} | {
        rid for rid, ss in servers.items() if len(ss) > 1
    }
    unpaired = {rid: list(ss) for rid, ss in servers.items()}
    rows = []
    for c in client_rows:
        rid = c["request_id"]
        row = {**c, "duplicate_request_id": rid in dup}
        if unpaired.get(rid):
            row.update(_server_cols(unpaired[rid].pop(0)), match_status="matched")
        else:
            row["match_status"] = "client-only"
        rows.append(row)
    for rid, left in unpaired.items():
        for s in left:
            phase, key, source = _phase_of_tag(s.tag)
            point, repeat = parse_point_key(key) if key else (None, 1)
            rows.append(
                {
                    "request_id": rid,
                    "phase": phase,
                    "point_id": point,
                    "source": source,
                    "_repeat": repeat,
                    "is_warmup": phase == WARMUP,
                    "match_status": "server-only",
                    "duplicate_request_id": rid in dup,
                    **_server_cols(s),
                }
            )
    return rows


def _derive(df: pd.DataFrame) -> pd.DataFrame:
    def col(c):
        return (
            pd.to_numeric(df[c], errors="coerce") if c in df else pd.Series(np.nan, index=df.index)
        )

    df["client_e2e_ms"] = (col("client_request_end_ns") - col("client_request_start_ns")) / NS_MS
    df["server_http_ms"] = (col("server_http_sent_ns") - col("server_http_received_ns")) / NS_MS
    df["client_to_server_ms"] = (
        col("server_http_received_ns") - col("client_request_start_ns")
    ) / NS_MS
    df["client_minus_task_wall_ms"] = df["client_e2e_ms"] - col("public_task_call_wall_ms")
    df["client_latency_minus_task_wall_ms"] = col("client_request_latency_ms") - col(
        "public_task_call_wall_ms"
    )
    df["server_ttft_ms"] = (col("server_first_token_ns") - col("server_http_received_ns")) / NS_MS
    df["server_ttfat_ms"] = (
        col("server_answer_first_token_ns") - col("server_http_received_ns")
    ) / NS_MS
    for (
        c
    ) in THINKING_COLUMNS:  # float whether or not any request thought: one arrow type in every run
        df[c] = col(c).astype(float)
    return df


def _terminal_cols(terminals: dict | None, request_id: str, client_error: str | None) -> dict:
    """With a raw export, each request's terminal event; a bad one is the request's client error."""
    if terminals is None:
        return {"client_error": client_error}
    t = terminals.get(request_id) or Terminal(None, "no raw export record: terminal event unknown")
    err = client_error or (
        json.dumps({"type": "TerminalEventError", "message": t.error}) if t.error else None
    )
    return {"client_error": err, "client_terminal_event": t.event}


def aiperf_client_rows(
    point_id: str, artifact_dir: Path, rel_dir: str, repeat: int = 1
) -> list[dict]:
    inputs = exports.read_inputs(artifact_dir)
    shares = max_cached_shares(inputs)
    outputs = exports.read_outputs(artifact_dir)
    terminals = read_terminals(artifact_dir)
    rows = []
    for r in exports.read_records(artifact_dir):
        warm = r["benchmark_phase"] == "warmup"
        key = (r["conversation_id"], r["turn_index"] or 0)
        text = exports.payload_text(inputs.get(key))
        out = outputs.get(r["request_id"])
        rows.append(
            {
                "request_id": r["request_id"],
                "point_id": point_id,
                "phase": WARMUP if warm else PROFILING,
                "source": "aiperf",
                "is_warmup": warm,
                "_repeat": repeat,
                "client_request_start_ns": r["request_start_ns"],
                "client_request_end_ns": r["request_end_ns"],
                "client_request_latency_ms": r["request_latency"],
                "client_ttft_ms": r["time_to_first_token"],
                "client_ttst_ms": r["time_to_second_token"],
                "client_itl_ms": r["inter_token_latency"],
                "client_decode_ms": r["decode_duration"],
                "client_isl": r["input_sequence_length"],
                "client_osl": r["output_sequence_length"],
                "client_osl_mismatch_pct": r["osl_mismatch_diff_pct"],
                "client_ttfot_ms": r["time_to_first_output_token"],
                "client_reasoning_tokens": r["reasoning_token_count"],
                "session_id": r["conversation_id"],
                "turn_index": r["turn_index"],
                "client_cached_tokens": r["usage_prompt_cache_read_tokens"],
                "max_cached_share": shares.get(key),
                **_terminal_cols(terminals, r["request_id"], r["client_error"]),
                "input_sha256": exports.sha256_text(text),
                "input_artifact": f"{rel_dir}/inputs.json#{key[0]}/{key[1]}"
                if text is not None
                else None,
                "output_sha256": exports.sha256_text(out),
                "output_chars": None if out is None else len(out),
                "output_artifact": f"{rel_dir}/outputs.json#{r['request_id']}"
                if out is not None
                else None,
            }
        )
    return rows


def session_client_rows(session_dir: Path) -> list[dict]:
    rows = []
    wp = session_dir / "warmup.parquet"
    if wp.exists():
        for w in pd.read_parquet(wp).to_dict("records"):
            rows.append(
                {
                    "request_id": w["request_id"],
                    "point_id": None,
                    "phase": WARMUP,
                    "source": "session-warmup",
                    "is_warmup": True,
                    "client_request_start_ns": w["client_start_ns"],
                    "client_request_end_ns": w["client_end_ns"],
                    "client_error": w["error"],
                }
            )
    pp = session_dir / "protocol.parquet"
    if pp.exists():
        for p in pd.read_parquet(pp).to_dict("records"):
            rows.append(
                {
                    "request_id": p["request_id"],
                    "point_id": None,
                    "phase": PROTOCOL,
                    "source": "protocol-check",
                    "is_warmup": False,
                    "client_error": None if p["passed"] else f"check {p['name']} failed",
                }
            )
    return rows


def request_table(
    session_dir: Path, points: Sequence[AiperfPoint], key: dict, run_id: str
) -> pd.DataFrame:
    """The `requests` table of a session: the session's own requests and every AIPerf run's, matched
    with the server's records; each row under its repeat's run id."""
    client = session_client_rows(session_dir)
    for p in points:
        for k in range(1, p.repeats + 1):
            adir = session_dir / "points" / point_key(p.point_id, k) / "aiperf"
            client += aiperf_client_rows(p.point_id, adir, str(adir), repeat=k)
    server = read_timing_log(session_dir / "server_timing.jsonl")
    req = pd.DataFrame(match(client, server))
    cached = cached_tokens_by_request(session_dir / "server_timing.jsonl")
    if "server_response_id" in req:  # matched or server-only: the server's own record's count
        has = req["server_response_id"].notna()
        req["server_cached_tokens"] = req["request_id"].map(cached).where(has)
    for c in TABLES["requests"]:
        if c not in req:
            req[c] = None
    req = _derive(req)
    repeat = (
        pd.to_numeric(req["_repeat"], errors="coerce").fillna(1).astype(int)
        if "_repeat" in req
        else pd.Series(1, index=req.index)
    )
    for k, v in key.items():
        req[k] = v
    req["run_id"] = [repeat_run_id(run_id, int(x)) for x in repeat]
    return conform(req.drop(columns=["_repeat"], errors="ignore"), "requests")
