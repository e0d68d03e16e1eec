"""The columns of the `requests` table (one row per request) and which of them the summary
aggregates."""

from __future__ import annotations

from qualflow.evidence.schema_key import KEY

# sessions (multi-turn and replayed agent traces) and the prefix cache
SESSION_COLUMNS = {
    "session_id": (
        "AIPerf conversation_id: the session the request belongs to (an inputs_json file's own "
        "session ids are kept); null for session warm-up and protocol"
    ),
    "turn_index": "AIPerf turn_index: the request's turn in its session, from 0",
    "server_cached_tokens": (
        "prompt tokens served from the server's prefix cache (timing record cached_tokens); null "
        "where the record has none"
    ),
    "client_cached_tokens": (
        "AIPerf usage_prompt_cache_read_tokens (the server's usage.input_tokens_details."
        "cached_tokens as the client read it)"
    ),
    "max_cached_share": (
        "the trace's own maximum: the share of the request's prompt that an earlier request of "
        "the point already sent (longest common prefix of the serialized tools, instructions and "
        "input items, in characters), from the exact payloads"
    ),
}

REQUESTS = {
    **KEY,
    "request_id": "X-Request-ID (AIPerf's x_request_id / our warm-up and protocol ids)",
    "point_id": (
        "workload point (<workload>_c<concurrency> or <workload>_r<rate>); null for session warm-"
        "up and protocol"
    ),
    "phase": "warmup | protocol | profiling",
    "source": "session-warmup | protocol-check | aiperf",
    "is_warmup": "true for session warm-up and AIPerf warm-up requests; excluded from summaries",
    "match_status": "matched | client-only | server-only",
    "duplicate_request_id": "request id seen more than once on one side",
    "client_request_start_ns": (
        "client wall clock (AIPerf request_start_ns / warm-up send time), epoch ns"
    ),
    "client_request_end_ns": "client wall clock of the last SSE message / body end, epoch ns",
    "client_e2e_ms": "client_request_end_ns - client_request_start_ns",
    "client_request_latency_ms": "AIPerf request_latency (start to last content event)",
    "client_ttft_ms": "AIPerf time_to_first_token",
    "client_ttst_ms": "AIPerf time_to_second_token",
    "client_itl_ms": "AIPerf inter_token_latency",
    "client_decode_ms": "AIPerf decode_duration",
    "client_isl": "AIPerf input_sequence_length (client tokenizer)",
    "client_osl": "AIPerf output_sequence_length (client tokenizer)",
    "client_osl_mismatch_pct": (
        "AIPerf osl_mismatch_diff_pct (0 when max_output_tokens was honoured)"
    ),
    "client_error": (
        "client-side error (JSON), null if none; a missing or failed terminal event is one"
    ),
    "client_terminal_event": (
        "last SSE event type (or body:<status>) from AIPerf's raw export; null when not exported "
        "(our server: its records are checked instead)"
    ),
    "server_response_id": "resp_<hex> of the server record",
    "server_tag": "X-Qualflow-Phase header the server saw (warmup | protocol | aiperf:<point>)",
    "server_status": "server record status",
    "server_http_status": "HTTP status the server sent",
    "server_error": "server-side error, null if none",
    "server_stream": "request was streamed",
    "finish_reason": "server finish reason (stop | length | ...)",
    "server_input_tokens": "prompt tokens (server tokenizer, incl. chat template)",
    "server_output_tokens": "generated tokens (server)",
    "server_http_received_ns": "server wall clock when the HTTP request was received, epoch ns",
    "server_http_sent_ns": (
        "server wall clock when the last byte was handed to the transport, epoch ns"
    ),
    "server_submitted_ns": "Task call start (request submitted to the engine), epoch ns",
    "server_first_scheduled_ns": "first engine step that included the request, epoch ns",
    "server_first_token_ns": "first token produced, epoch ns",
    "server_finished_ns": "Task call end, epoch ns",
    "server_queue_wait_ms": "first_scheduled - submitted",
    "server_prefill_ms": "first_token - first_scheduled",
    "server_decode_ms": "finished - first_token",
    "public_task_call_wall_ms": "Task call end - Task call start (public_task_call_wall)",
    "server_http_ms": "server_http_sent_ns - server_http_received_ns",
    "client_to_server_ms": (
        "server_http_received_ns - client_request_start_ns (connect + send + accept)"
    ),
    "client_minus_task_wall_ms": (
        "client_e2e_ms - public_task_call_wall_ms (HTTP, SSE, network, client)"
    ),
    "client_latency_minus_task_wall_ms": "client_request_latency_ms - public_task_call_wall_ms",
    "input_sha256": "sha256 of the request's input text",
    "input_artifact": "where the exact request body lies (file#session/turn)",
    "output_sha256": "sha256 of the output text (when exported)",
    "output_chars": "length of the output text",
    "output_artifact": "where the output text lies",
    "client_ttfot_ms": (
        "AIPerf time_to_first_output_token: to the first non-reasoning content event (the "
        "answer); equal to client_ttft_ms without reasoning events"
    ),
    "client_reasoning_tokens": (
        "AIPerf reasoning_token_count (client tokenizer over the reasoning text); null without "
        "reasoning events"
    ),
    "server_reasoning_tokens": (
        "reasoning tokens generated (server timing record reasoning_tokens); null where the "
        "record has none (no thinking, or a server that does not record it)"
    ),
    "server_answer_tokens": (
        "answer tokens generated after the reasoning (server timing record answer_tokens)"
    ),
    "server_tool_calls": (
        "function calls in the response (server timing record tool_calls); null where the "
        "request offered no tools or the record has none"
    ),
    "server_answer_first_token_ns": (
        "server wall clock when the first answer token was produced, epoch ns"
    ),
    "server_ttft_ms": (
        "server_first_token_ns - server_http_received_ns (the first token of any kind, reasoning "
        "included)"
    ),
    "server_ttfat_ms": (
        "server_answer_first_token_ns - server_http_received_ns (time to the first answer token)"
    ),
    **SESSION_COLUMNS,
}

# The per-request columns the summary table aggregates, and how (`<metric>_<stat>` columns): the
# latencies, then the figures of thinking (TTFT beside the time to the first answer token, and the
# token counts; null at a point without reasoning).
SUMMARY_METRICS = (
    "client_request_latency_ms",
    "client_ttft_ms",
    "client_itl_ms",
    "public_task_call_wall_ms",
    "server_queue_wait_ms",
    "server_prefill_ms",
    "server_decode_ms",
    "client_minus_task_wall_ms",
)
REASONING_METRICS = (
    "client_ttfot_ms",
    "server_ttft_ms",
    "server_ttfat_ms",
    "client_reasoning_tokens",
    "server_reasoning_tokens",
    "server_answer_tokens",
)
# the ones that need the server's timing records: null for a run without server timing (an endpoint)
SERVER_METRICS = (
    "public_task_call_wall_ms",
    "server_queue_wait_ms",
    "server_prefill_ms",
    "server_decode_ms",
    "client_minus_task_wall_ms",
    "server_ttft_ms",
    "server_ttfat_ms",
    "server_reasoning_tokens",
    "server_answer_tokens",
)
