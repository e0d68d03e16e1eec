"""The settings of `qualflow bench engine` and `qualflow bench server`: one frozen dataclass each,
whose field defaults are the only defaults and from which the commands' flags are generated
(qualflow.configs). Light at import: the CLI builds these flags on every call."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from qualflow.configs import setting

PLANS = Literal[
    "async",
    "v3",
    "wait",
    "skinny",
    "pdl",
    "budget",
    "rows",
    "prefix",
    "hopper",
    "gemv",
    "rope",
    "solo",
    "tools",
]


@dataclass(frozen=True)
class EngineBenchConfig:
    """Task-level points on a Qwen3-0.6B-shaped checkpoint of seeded random weights, the offline
    workload and each point's roofline, through the engine variants of a plan (variants.py)."""

    work: str = setting("/tmp/qualflow-gpu", help="work folder: checkpoint, pin and bundle")
    out: str = setting(
        "benchmarks/results",
        help="results folder: the run goes to <out>/<GPU model>/<date>-engine-<plan><suffix>.json",
    )
    suffix: str = setting("", help="appended to the result's name")
    plan: PLANS = setting(
        "async",
        help="the engine variants to load in turn (qualflow.bench."
        "variants); async: per --async-scheduling",
    )
    skip_hf: bool = setting(False, help="no HF transformers generate beside the first two points")
    skip_mixed: bool = setting(
        False, help="plan async: no extra load with mixed prefill + decode steps"
    )
    skip_correctness: bool = setting(False, help="no family correctness run")
    skip_offline: bool = setting(False, help="no nano-vllm offline workload")
    skip_equality: bool = setting(False, help="no greedy probe of each variant against the first")
    skip_multiturn: bool = setting(
        False,
        help="no multi-turn point (sessions re-sending their history; the last turn's TTFT with "
        "the prefix cache on and off)",
    )
    skip_agent_replay: bool = setting(
        False,
        help="no agent-replay point (the recorded agent sessions of --agent-trace, the prefix cache"
        " on and off: throughput, TTFT, hit rate beside the trace's maximum)",
    )
    agent_trace: str = setting(
        "workloads/agent/agent-v1.json",
        help="the agent-replay point's sessions (AIPerf inputs_json), from the working directory",
    )
    agent_concurrency: int = setting(16, help="sessions the agent-replay point runs at once")
    kv_cache_gb: float = setting(0.0, help="KV pool size (0: half the free memory)")
    max_num_batched_tokens: int = setting(0, help="prefill token budget (0: the engine's)")
    async_scheduling: Literal["off", "on", "ab"] = setting(
        "on",
        help="plan async: the engine's overlapped scheduling: on, off, or ab (both, one after "
        "the other, on the same bundle; the overlapped points get the suffix _async)",
    )
    points: str = setting(
        "",
        help="comma-separated point names (default: each variant's own; plan "
        "async: all, or with --async-scheduling ab the async points)",
    )
    engine_process: Literal["on", "off"] = setting(
        "on",
        help="on: after the variants, the variant of record's points and offline workload "
        "again with the engine in its own process (tag suffix _proc)",
    )
    min_seconds: float = setting(5.0, help="measured time per point, at least (--tiny: at most 1)")
    min_repeats: int = setting(3, help="repeats per point, at least (median and spread)")
    paired_rounds: int = setting(
        0,
        help="the plan's A/B pairs again with both variants loaded, their shared points "
        "alternated for this many rounds (one repeat of each side a round; the median of the "
        "rounds' ratios); 0: none",
    )
    prev: str | None = setting(
        None,
        help="the committed results, one folder per GPU model, to "
        "print this run beside (default: --out)",
    )
    deadline_s: float = setting(
        1e9,
        help="after this long, later variants measure only their first "
        "point, and the optional parts are skipped",
    )
    tiny: bool = setting(
        False,
        help="CPU smoke run: the embedded tiny model on cpu, points scaled to "
        "c<=4, ISL<=32, OSL<=16, no HF, mixed, correctness or offline "
        "workload; prefill padding runs eagerly",
    )

    def resolved(self) -> EngineBenchConfig:
        """What a run uses: with --tiny, the optional parts off and at most 1 s per point."""
        if not self.tiny:
            return self
        return dataclasses.replace(
            self,
            skip_hf=True,
            skip_mixed=True,
            skip_correctness=True,
            skip_offline=True,
            min_seconds=min(self.min_seconds, 1.0),
        )

    @property
    def shape(self) -> str:
        return "tiny" if self.tiny else "qwen3-0.6b"


@dataclass(frozen=True)
class ServerBenchConfig:
    """The server against the Task and the harness ceiling, per point: the Task alone, `qualflow
    serve` + AIPerf, and `qualflow serve --engine synthetic` + the same AIPerf points."""

    work: str = setting("/tmp/qualflow-speed", help="work folder: bundle, AIPerf exports, logs")
    out: str = setting("", help="where the result goes (default <work>/out)")
    name: str = setting(
        "",
        help="the result's file name (default <date>-server.json; "
        "--mode scaling: <date>-<GPU model>-ceiling-scaling.json)",
    )
    mode: Literal["speed", "scaling", "http", "store"] = setting(
        "speed",
        help="scaling: only the ceiling, at each AIPerf workers:record_processors pair of "
        "--grid and each point; http: the HTTP part of a c1 request under each of "
        "--http-servers (synthetic engine, no AIPerf), alternated; store: each point with the "
        "response store off and on (SQLite), alternated over --store-rounds",
    )
    device: Literal["auto", "cuda", "cpu"] = setting(
        "auto", help="auto: cuda where nvidia-smi sees a GPU"
    )
    preset: str = setting(
        "",
        help="embedded checkpoint (default qwen3-0.6b on cuda, tiny on cpu and in --mode scaling)",
    )
    points: str = setting(
        "",
        help="concurrencies, space-separated (default '1 64 256'; scaling: '64 256'; store: '64')",
    )
    isl: int = setting(128, help="prompt tokens per request")
    osl: int = setting(128, help="output tokens per request (ignore_eos)")
    max_batch: int = setting(0, help="the server's batch (0: 64 on cuda, 8 on cpu)")
    max_context: int = setting(512, help="the server's context")
    requests: int = setting(
        0, help="requests per point, Task and server alike (0: c1 48, c64 2048, else 12c)"
    )
    workers: int = setting(0, help="AIPerf workers_max (0: 8 on cuda, 1 on cpu)")
    record_processors: int = setting(0, help="AIPerf record processors (0: 4 on cuda, 1 on cpu)")
    ceiling_step_ms: float = setting(1.0, help="the ceiling's synthetic step")
    api_servers: int = setting(1, help="the stack's server's --api-server-count")
    ceiling_api_servers: int = setting(0, help="the ceiling's API processes (0: --api-servers)")
    serve_flags: str = setting("", help="extra `qualflow serve` flags for the stack's server")
    request_sampling: str = setting(
        '{"temperature":0}',
        help="a JSON object of sampling fields the AIPerf requests "
        "carry ('{}': the server's default)",
    )
    skip_task: bool = setting(False, help="reuse <work>/task_level.json")
    skip_ceiling: bool = setting(False, help="no harness ceiling")
    baseline: str = setting(
        "",
        help="the committed result to compare with (default the newest of "
        "this device with the same settings)",
    )
    results: str = setting("benchmarks/results", help="the committed results, a folder per device")
    grid: str = setting(
        "1:1 2:1 4:1 4:2 8:2 8:4 16:4 16:8",
        help="--mode scaling: AIPerf workers:record_processors pairs",
    )
    scaling_requests_per_c: int = setting(8, help="--mode scaling: requests per point, times c")
    port: int = setting(8765, help="the servers' port")
    http_servers: str = setting(
        "uvicorn granian", help="--mode http: the ASGI servers (--http-server) to alternate"
    )
    http_requests: int = setting(200, help="--mode http: measured c1 requests per server a round")
    http_rounds: int = setting(4, help="--mode http: rounds, each server once a round")
    http_pin: bool = setting(
        True,
        help="--mode http: the client on the last CPU, the server on the others (a client "
        "sharing the server's CPU takes it over at each write that wakes it)",
    )
    store_rounds: int = setting(
        2, help="--mode store: rounds, each side once a round (off, on; then on, off)"
    )
