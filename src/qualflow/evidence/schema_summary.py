"""The columns of the `summary` table: one row per point run."""

from __future__ import annotations

from qualflow.evidence.schema_key import KEY
from qualflow.evidence.schema_requests import REASONING_METRICS, SERVER_METRICS, SUMMARY_METRICS

SUMMARY_PERCENTILES = (50, 90, 99)
SUMMARY_STATS = ("mean", *(f"p{q}" for q in SUMMARY_PERCENTILES))


def _stat_columns(metrics: tuple[str, ...]) -> dict:
    return {
        f"{m}_{s}": f"{s} of {m} over the point's samples (evidence.samples: matched profiling "
        "requests; for an endpoint, its error-free client-only ones"
        + ("; null for an endpoint: no server timing)" if m in SERVER_METRICS else ")")
        for m in metrics
        for s in SUMMARY_STATS
    }


# the prefix cache at a point: how much of the prompts it served, beside what the trace allowed
CACHE_COLUMNS = {
    "cache_hit_rate": (
        "server_cached_tokens / server_input_tokens over the point's matched profiling requests "
        "(null where the records carry no cached_tokens)"
    ),
    "aiperf_cache_hit_rate": (
        "AIPerf overall_usage_prompt_cache_read_pct / 100 (the same figure as the client read it)"
    ),
    "max_cache_hit_rate": (
        "the trace's own maximum hit rate: max_cached_share weighted by each request's prompt "
        "tokens (server_input_tokens, else client_isl)"
    ),
    "cache_off_client_ttft_ms_p50": (
        "AIPerf time_to_first_token p50 (client_ttft_ms) of the point's cache-off rerun (workload "
        "cache_off_rerun: the same requests, once, against the server with --no-prefix-caching; "
        "null without one, or when that run is not valid)"
    ),
    "cache_off_reasons": "why the point has no cache-off figure although its workload asked one",
}

SUMMARY = {
    **KEY,
    "point_id": "workload point",
    "workload": "the workload the point belongs to",
    "load_kind": "concurrency (closed loop) | request_rate (open loop)",
    "concurrency": (
        "AIPerf --concurrency (at a request_rate point: the cap on requests in flight, if any)"
    ),
    "request_rate": "AIPerf --request-rate, requests/s (open loop; null at concurrency points)",
    "arrival_pattern": (
        "AIPerf --request-rate-mode at request_rate points (poisson | constant | gamma)"
    ),
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
    "duplicate_request_ids": (
        "request ids of this point with more than one record on a side (fails accounting)"
    ),
    "n_errors": "profiling requests with a client or server error",
    "n_server_osl_mismatch": (
        "matched profiling requests whose server output_tokens != osl (ignore_eos runs)"
    ),
    "aiperf_warnings": "non-fatal findings (e.g. client-tokenized OSL mismatch)",
    "n_warmup_excluded": "AIPerf warm-up requests (flagged, excluded from every figure here)",
    "benchmark_duration_s": "AIPerf benchmark_duration",
    "request_throughput_rps": "AIPerf request_throughput",
    "output_token_throughput_tps": "AIPerf output_token_throughput",
    "error_rate": "n_errors / request_count",
    "goodput_fraction": (
        "fraction of the sent profiling requests that succeeded and met every per-request goodput"
        " bound of the SLO (null without a goodput SLO)"
    ),
    "aiperf_goodput_fraction": (
        "AIPerf good_request_count / request_count (--goodput; null without a goodput SLO)"
    ),
    "ceiling_step_ms": (
        "step clock (ms) of the harness ceiling: the point run once more, same AIPerf settings, "
        "against our server on the synthetic engine (workload harness_ceiling; null without one)"
    ),
    "ceiling_output_token_throughput_tps": (
        "AIPerf output_token_throughput of the point's harness-ceiling run: the serving path and "
        "AIPerf with no model behind them (null: no ceiling, or its run was not valid)"
    ),
    "ceiling_client_itl_ms_p50": "AIPerf inter_token_latency p50 of the harness-ceiling run",
    "share_of_ceiling": (
        "output_token_throughput_tps / ceiling_output_token_throughput_tps: near 1, the serving "
        "path or AIPerf is the limit; well below, the stack's engine is"
    ),
    "ceiling_reasons": "why the point has no ceiling figures although its workload asked for them",
    "roofline_gpu": "the GPU whose datasheet peaks the point's roofline used (qualflow.roofline)",
    "roofline_output_token_throughput_tps": (
        "output tok/s limit of the point (evidence.roofline: the bundle's weight and K/V reads at "
        "the GPU's peak bandwidth, its prefill FLOPs at the peak FP16 FLOP/s), null without one"
    ),
    "share_of_roofline": "output_token_throughput_tps / roofline_output_token_throughput_tps",
    "roofline_reasons": "why the point has no roofline (a CPU session, an unknown GPU, ...)",
    **_stat_columns(SUMMARY_METRICS),
    "aiperf_ok": "AIPerf run judged successful from its exports",
    "aiperf_reasons": "why not, if not",
    "dataset_sha256": "sha256 of AIPerf inputs.json (dataset identity)",
    "input_file_sha256": (
        "sha256 of the workload's prompt file (--input-file), null for synthetic prompts"
    ),
    "payloads_sha256": (
        "sha256 of inputs.json's payloads without their `model` field (the dataset identity of a "
        "cross-stack comparison: stacks name the model differently)"
    ),
    "status": "qualification status reached for this point",
    "reasoning_effort": (
        "Responses reasoning.effort the point's requests sent (null: none, thinking off)"
    ),
    **_stat_columns(REASONING_METRICS),
    "server_tool_calls": (
        "function calls the point's profiling requests got (the sum of the requests' "
        "server_tool_calls); null where none offered tools"
    ),
    **CACHE_COLUMNS,
}
