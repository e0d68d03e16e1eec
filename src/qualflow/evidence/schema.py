"""Evidence table schemas: one schema version for all tables; every column documented here (the
README's table is generated from / checked against this)."""

from __future__ import annotations

SCHEMA_VERSION = "1.0"

STATUS_LADDER = (
    "planned",
    "implemented",
    "family-validated",
    "protocol-conformant",
    "aiperf-qualified",
    "slo-met",
)
# what each rung means: evidence/status.py (and the README's "Qualification status")

_KEY = {
    "schema_version": "evidence schema version (this file's SCHEMA_VERSION)",
    "run_id": "<model>.<profile>.<session start UTC>; unique per serving session; repeat k >= 2 of a "
    "point is its own run: <...>.r<k>",
    "software_key": "qualflow version + git sha the evidence was produced with",
    "model": "model name from the config",
    "profile": "build profile (e.g. fp16)",
}

REQUESTS = {
    **_KEY,
    "request_id": "X-Request-ID (AIPerf's x_request_id / our warm-up and protocol ids)",
    "point_id": "workload point (<workload>_c<concurrency> or <workload>_r<rate>); null for session warm-up "
    "and protocol",
    "phase": "warmup | protocol | profiling",
    "source": "session-warmup | protocol-check | aiperf",
    "is_warmup": "true for session warm-up and AIPerf warm-up requests; excluded from summaries",
    "match_status": "matched | client-only | server-only",
    "duplicate_request_id": "request id seen more than once on one side",
    "client_request_start_ns": "client wall clock (AIPerf request_start_ns / warm-up send time), epoch ns",
    "client_request_end_ns": "client wall clock of the last SSE message / body end, epoch ns",
    "client_e2e_ms": "client_request_end_ns - client_request_start_ns",
    "client_request_latency_ms": "AIPerf request_latency (start to last content event)",
    "client_ttft_ms": "AIPerf time_to_first_token",
    "client_ttst_ms": "AIPerf time_to_second_token",
    "client_itl_ms": "AIPerf inter_token_latency",
    "client_decode_ms": "AIPerf decode_duration",
    "client_isl": "AIPerf input_sequence_length (client tokenizer)",
    "client_osl": "AIPerf output_sequence_length (client tokenizer)",
    "client_osl_mismatch_pct": "AIPerf osl_mismatch_diff_pct (0 when max_output_tokens was honoured)",
    "client_error": "client-side error (JSON), null if none; a missing or failed terminal event is one",
    "client_terminal_event": "last SSE event type (or body:<status>) from AIPerf's raw export; null when not "
    "exported (our server: its records are checked instead)",
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
    "server_http_sent_ns": "server wall clock when the last byte was handed to the transport, epoch ns",
    "server_submitted_ns": "Task call start (request submitted to the engine), epoch ns",
    "server_first_scheduled_ns": "first engine step that included the request, epoch ns",
    "server_first_token_ns": "first token produced, epoch ns",
    "server_finished_ns": "Task call end, epoch ns",
    "server_queue_wait_ms": "first_scheduled - submitted",
    "server_prefill_ms": "first_token - first_scheduled",
    "server_decode_ms": "finished - first_token",
    "public_task_call_wall_ms": "Task call end - Task call start (public_task_call_wall)",
    "server_http_ms": "server_http_sent_ns - server_http_received_ns",
    "client_to_server_ms": "server_http_received_ns - client_request_start_ns (connect + send + accept)",
    "client_minus_task_wall_ms": "client_e2e_ms - public_task_call_wall_ms (HTTP, SSE, network, client)",
    "client_latency_minus_task_wall_ms": "client_request_latency_ms - public_task_call_wall_ms",
    "input_sha256": "sha256 of the request's input text",
    "input_artifact": "where the exact request body lies (file#session/turn)",
    "output_sha256": "sha256 of the output text (when exported)",
    "output_chars": "length of the output text",
    "output_artifact": "where the output text lies",
    # thinking on (requests with `reasoning`): reasoning first, then the answer
    "client_ttfot_ms": "AIPerf time_to_first_output_token: to the first non-reasoning content event (the answer); "
    "equal to client_ttft_ms without reasoning events",
    "client_reasoning_tokens": "AIPerf reasoning_token_count (client tokenizer over the reasoning text); null "
    "without reasoning events",
    "server_reasoning_tokens": "reasoning tokens generated (server timing record reasoning_tokens); null where the "
    "record has none (no thinking, or a server that does not record it)",
    "server_answer_tokens": "answer tokens generated after the reasoning (server timing record answer_tokens)",
    "server_answer_first_token_ns": "server wall clock when the first answer token was produced, epoch ns",
    "server_ttft_ms": "server_first_token_ns - server_http_received_ns (the first token of any kind, reasoning "
    "included)",
    "server_ttfat_ms": "server_answer_first_token_ns - server_http_received_ns (time to the first answer token)",
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
SUMMARY_PERCENTILES = (50, 90, 99)
SUMMARY_STATS = ("mean", *(f"p{q}" for q in SUMMARY_PERCENTILES))


def _stat_columns(metrics: tuple[str, ...]) -> dict:
    return {
        f"{m}_{s}": f"{s} of {m} over the point's samples (evidence.samples: matched profiling requests; "
        "for an endpoint, its error-free client-only ones"
        + ("; null for an endpoint: no server timing)" if m in SERVER_METRICS else ")")
        for m in metrics
        for s in SUMMARY_STATS
    }


SUMMARY = {
    **_KEY,
    "point_id": "workload point",
    "workload": "the workload the point belongs to",
    "load_kind": "concurrency (closed loop) | request_rate (open loop)",
    "concurrency": "AIPerf --concurrency (at a request_rate point: the cap on requests in flight, if any)",
    "request_rate": "AIPerf --request-rate, requests/s (open loop; null at concurrency points)",
    "arrival_pattern": "AIPerf --request-rate-mode at request_rate points (poisson | constant | gamma)",
    "repeat": "which repeat of the point this run is (1..repeats)",
    "repeats": "repeats configured for the point (each its own run id)",
    "isl": "requested input tokens (mean)",
    "osl": "requested output tokens (mean)",
    "request_count": "configured profiling requests",
    "n_client": "AIPerf profiling records",
    "n_server": "server records tagged for this point's profiling",
    "n_matched": "profiling requests present on both sides",
    "n_client_only": "client records without server record",
    "n_server_only": "server records without client record (incl. AIPerf warm-up leftovers)",
    "duplicate_request_ids": "request ids of this point with more than one record on a side (fails accounting)",
    "n_errors": "profiling requests with a client or server error",
    "n_server_osl_mismatch": "matched profiling requests whose server output_tokens != osl (ignore_eos runs)",
    "aiperf_warnings": "non-fatal findings (e.g. client-tokenized OSL mismatch)",
    "n_warmup_excluded": "AIPerf warm-up requests (flagged, excluded from every figure here)",
    "benchmark_duration_s": "AIPerf benchmark_duration",
    "request_throughput_rps": "AIPerf request_throughput",
    "output_token_throughput_tps": "AIPerf output_token_throughput",
    "error_rate": "n_errors / request_count",
    "goodput_fraction": "fraction of the sent profiling requests that succeeded and met every per-request goodput "
    "bound of the SLO (null without a goodput SLO)",
    "aiperf_goodput_fraction": "AIPerf good_request_count / request_count (--goodput; null without a goodput SLO)",
    "ceiling_step_ms": "step clock (ms) of the harness ceiling: the point run once more, same AIPerf settings, "
    "against our server on the synthetic engine (workload harness_ceiling; null without one)",
    "ceiling_output_token_throughput_tps": "AIPerf output_token_throughput of the point's harness-ceiling run: "
    "the serving path and AIPerf with no model behind them (null: no "
    "ceiling, or its run was not valid)",
    "ceiling_client_itl_ms_p50": "AIPerf inter_token_latency p50 of the harness-ceiling run",
    "share_of_ceiling": "output_token_throughput_tps / ceiling_output_token_throughput_tps: near 1, the serving "
    "path or AIPerf is the limit; well below, the stack's engine is",
    "ceiling_reasons": "why the point has no ceiling figures although its workload asked for them",
    **_stat_columns(SUMMARY_METRICS),
    "aiperf_ok": "AIPerf run judged successful from its exports",
    "aiperf_reasons": "why not, if not",
    "dataset_sha256": "sha256 of AIPerf inputs.json (dataset identity)",
    "input_file_sha256": "sha256 of the workload's prompt file (--input-file), null for synthetic prompts",
    "payloads_sha256": "sha256 of inputs.json's payloads without their `model` field (the dataset identity "
    "of a cross-stack comparison: stacks name the model differently)",
    "status": "qualification status reached for this point",
    "reasoning_effort": "Responses reasoning.effort the point's requests sent (null: none, thinking off)",
    **_stat_columns(REASONING_METRICS),
}

CORRECTNESS = {
    **_KEY,
    "case_id": "case",
    "prompt_id": "prompt",
    "criterion": "criterion",
    "measured": "measured value",
    "threshold": "threshold",
    "passed": "pass",
    "thresholds_version": "version of the family thresholds applied",
    "detail": "what was compared",
    "effective_precision": "precision the comparison ran at",
    "device": "device",
}

PROTOCOL = {
    **_KEY,
    "name": "check name",
    "passed": "pass",
    "detail": "what was seen",
    "request_id": "X-Request-ID of the check's request",
}

RUNS = {
    **_KEY,
    "point_id": "workload point",
    "status": "qualification status: " + " | ".join(STATUS_LADDER),
    "status_reasons": "why the next status was not reached",
    "qualflow_version": "qualflow version",
    "git_sha": "git commit",
    "git_dirty": "uncommitted changes present",
    "packages": "JSON: every relevant package version",
    "python": "python version",
    "os": "OS",
    "hardware": "JSON: CPU/GPU names, counts, driver, CUDA",
    "checkpoint": "checkpoint id or path",
    "checkpoint_revision": "commit sha (hub) or content hash",
    "pin": "JSON: pin.json",
    "bundle_hash": "bundle manifest hash",
    "bundle_manifest": "JSON: manifest (per-file hashes elided)",
    "stack": "qualflow (our server on a bundle) | endpoint (an external Responses endpoint)",
    "server_timing": "available (server Task timing records joined) | unavailable (endpoint: client side only)",
    "served_model": "model name the requests named (an endpoint's /v1/models id)",
    "device": "device (null for an endpoint)",
    "precision": "effective precision",
    "context_limit": "context limit (tokens)",
    "generation_config": "JSON: generation config from the bundle",
    "dataset_sha256": "AIPerf inputs.json sha256",
    "seed": "AIPerf --random-seed",
    "input_file_sha256": "sha256 of the workload's prompt file (dataset identity with dataset_sha256)",
    "endpoint": "endpoint url + path",
    "streaming": "stream mode",
    "gpu": "JSON: the GPU the session leased (index, uuid, name, cores) and the other jobs holding GPUs "
    "during it; null on CPU",
    "server_settings": "JSON: the serving session's settings (device, max_batch, max_context, cpu_threads, "
    "AIPerf workers and record processors, warm-up, protocol checks on/off; api_server_count above "
    "1; store, the response store's backend, and api_keys, when served with state)",
    "workload": "JSON: the workload point settings",
    "startup": "JSON: load / startup / warm-up times (never in steady-state figures)",
    "stage_times": "JSON: per-stage wall times of the serving session",
    "commands": "JSON: exact commands (server, AIPerf, stages)",
    "started_utc": "session start",
    "ended_utc": "session end",
}

TARGETS = {
    **_KEY,
    "point_id": "workload point",
    "workload": "the workload the point belongs to",
    "load_kind": "concurrency | request_rate",
    "load": "the point's concurrency or request rate",
    "figure": "summary column measured (e.g. client_ttft_ms_p50, output_token_throughput_tps)",
    "mean": "mean of the figure over the point's repeats",
    "ci_low": "lower end of the Student-t CI of the mean over repeats (null with one repeat)",
    "ci_high": "upper end of that CI",
    "ci_level": "confidence level of the CI (0.95)",
    "n_repeats": "repeats the figure was measured in",
    "values": "JSON: the figure in each repeat, in order",
    "repeat_run_ids": "JSON: the run id of each repeat, in order",
    "slo": "the SLO bounding the figure (e.g. ttft_ms.p50), null for a headline figure without one",
    "op": "<= or >=",
    "bound": "the SLO's bound",
    "met": "the mean meets the bound",
    "marginal": "met, but the CI reaches beyond the bound",
    "reason": "the miss: metric, bound, measured value (and CI with repeats); for a server-side figure of an "
    "endpoint (null), why it is null",
}

TABLES = {
    "requests": REQUESTS,
    "summary": SUMMARY,
    "correctness": CORRECTNESS,
    "protocol": PROTOCOL,
    "runs": RUNS,
    "targets": TARGETS,
}
TABLE_NAMES = tuple(TABLES)  # the one list of evidence table names (one parquet file each)


# Text columns that may be null on every row of a run: stored as strings all the same, so that a
# table's arrow types do not depend on whether a run had, say, any AIPerf warning.
TEXT_COLUMNS = {"summary": ("aiperf_warnings",)}


def conform(df, table: str):
    """Order columns by the schema, add missing ones as null, refuse undocumented extras;
    TEXT_COLUMNS are strings whatever their values."""
    cols = list(TABLES[table])
    extra = [c for c in df.columns if c not in TABLES[table]]
    if extra:
        raise ValueError(f"{table}: undocumented columns {extra}")
    for c in cols:
        if c not in df.columns:
            df[c] = None
    for c in TEXT_COLUMNS.get(table, ()):
        df[c] = df[c].astype("string")
    return df[cols]
