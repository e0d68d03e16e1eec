"""The columns of the `correctness`, `protocol`, `runs` and `targets` tables."""

from __future__ import annotations

from qualflow.evidence.schema_key import KEY

CORRECTNESS = {
    **KEY,
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
    **KEY,
    "name": "check name",
    "passed": "pass",
    "detail": "what was seen",
    "request_id": "X-Request-ID of the check's request",
}

RUNS = {
    **KEY,
    "point_id": "workload point",
    "status": (
        "qualification status: planned | implemented | family-validated | protocol-conformant | "
        "aiperf-qualified | slo-met"
    ),
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
    "server_timing": (
        "available (server Task timing records joined) | unavailable (endpoint: client side only)"
    ),
    "served_model": "model name the requests named (an endpoint's /v1/models id)",
    "device": "device (null for an endpoint)",
    "precision": "effective precision",
    "context_limit": "context limit (tokens)",
    "generation_config": "JSON: generation config from the bundle",
    "dataset_sha256": "AIPerf inputs.json sha256",
    "seed": "AIPerf --random-seed",
    "input_file_sha256": (
        "sha256 of the workload's prompt file (dataset identity with dataset_sha256)"
    ),
    "endpoint": "endpoint url + path",
    "streaming": "stream mode",
    "gpu": (
        "JSON: the GPU the session leased (index, uuid, name, cores) and the other jobs holding "
        "GPUs during it; null on CPU"
    ),
    "server_settings": (
        "JSON: the serving session's settings (device, max_batch, max_context, cpu_threads, "
        "AIPerf workers and record processors, warm-up, protocol checks on/off; api_server_count "
        "above 1; store, the response store's backend, and api_keys, when served with state)"
    ),
    "workload": "JSON: the workload point settings",
    "startup": "JSON: load / startup / warm-up times (never in steady-state figures)",
    "stage_times": "JSON: per-stage wall times of the serving session",
    "commands": "JSON: exact commands (server, AIPerf, stages)",
    "started_utc": "session start",
    "ended_utc": "session end",
}

TARGETS = {
    **KEY,
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
    "reason": (
        "the miss: metric, bound, measured value (and CI with repeats); for a server-side figure "
        "of an endpoint (null), why it is null"
    ),
}
