"""The pinned `aiperf profile` command for one workload point."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field

from qualflow.aiperf.options import AiperfOptions, ClientOptions
from qualflow.aiperf.sessions import check_sessions, session_args
from qualflow.phases import PHASE_HEADER

PINNED_AIPERF = "0.13.0"
ARRIVAL_PATTERNS = ("poisson", "constant", "gamma")
PROMPT_CORPORA = (
    "sonnet",
    "coding",
    "random",
)  # AIPerf --prompt-corpus: the text synthetic prompts are cut from
# per-request goodput bounds: our name -> AIPerf metric tag (values in ms, AIPerf's display unit)
GOODPUT_TAGS = {
    "ttft_ms": "time_to_first_token",
    "itl_ms": "inter_token_latency",
    "request_latency_ms": "request_latency",
}


@dataclass(frozen=True)
class AiperfPoint:
    """One workload point: everything that changes the requests AIPerf sends."""

    point_id: str
    concurrency: (
        int | None
    )  # closed loop; with request_rate: a cap on requests in flight (None: none)
    isl: int | None  # synthetic prompts; None with input_file
    osl: int
    isl_stddev: int = 0
    osl_stddev: int = 0
    request_count: int = 16
    warmup_request_count: int = 4
    num_dataset_entries: int = 0  # 0: request_count + warmup_request_count
    seed: int = 42
    streaming: bool = True
    ignore_eos: bool = True
    min_tokens: int | None = None  # None: equal to osl (with ignore_eos: exact OSL)
    request_timeout_s: float = 600.0
    extra_inputs: dict = field(default_factory=dict)
    workload: str | None = None  # the workload the point belongs to
    request_rate: float | None = None  # open loop, requests/s (AIPerf --request-rate)
    arrival_pattern: str = "poisson"  # AIPerf --request-rate-mode for request_rate points
    input_file: str | None = None  # single-turn JSONL prompt file (AIPerf --input-file)
    # where synthetic prompts come from (AIPerf --prompt-corpus, PROMPT_CORPORA; None: AIPerf's
    # default, Shakespeare's sonnets); `random`: random token ids, as vLLM's random dataset (AIPerf
    # then skips tokenizing its 5 MB corpus, about 2 CPU-s a run)
    prompt_corpus: str | None = None
    sampling: dict = field(
        default_factory=dict
    )  # temperature / top_p / top_k, sent via --extra-inputs
    reasoning: dict = field(
        default_factory=dict
    )  # Responses `reasoning` ({effort}), via --extra-inputs; {}: none
    # function tools sent with every request ({functions, tool_choice, parallel_tool_calls}: the
    # Responses `tools`, `tool_choice` and `parallel_tool_calls`, via --extra-inputs); {}: none
    tools: dict = field(default_factory=dict)
    goodput: dict = field(
        default_factory=dict
    )  # per-request bounds (GOODPUT_TAGS keys) for AIPerf --goodput
    repeats: int = 1  # AIPerf runs of this point against the same warmed server
    # qualflow's request extensions (ignore_eos, min_tokens); false: standard Responses fields only,
    # for an endpoint that rejects (or would silently ignore) fields outside the spec
    request_extensions: bool = True
    # also run the point against a synthetic-engine server (the session's harness ceiling): no
    # change to the requests, recorded as the ceiling's runs, never as the stack's
    harness_ceiling: bool = False
    # sessions (qualflow.aiperf.sessions): AIPerf multi-turn sessions, replayed agent traces, a
    # shared system prompt; and a rerun of the point with the server's prefix cache off
    conversation_num: int | None = None
    conversation_turn_mean: int = 1
    conversation_turn_stddev: int = 0
    chaining: str | None = None  # "previous_response_id": store on, only the newest turn sent
    inputs_json: str | None = None  # recorded sessions, sent verbatim (AIPerf inputs_json)
    shared_system_prompt_length: int | None = None
    cache_off_rerun: bool = False

    @classmethod
    def from_dict(cls, d: dict) -> AiperfPoint:
        known = set(cls.__dataclass_fields__)
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown workload point keys: {sorted(unknown)}")
        return cls(**d)

    def to_dict(self) -> dict:
        return asdict(self)

    def extra_inputs_payload(self) -> dict:
        extra = {"store": False}
        if self.request_extensions:
            extra.update(
                ignore_eos=bool(self.ignore_eos),
                min_tokens=int(self.osl if self.min_tokens is None else self.min_tokens),
            )
        extra.update(self.sampling)
        if (
            self.reasoning
        ):  # a standard Responses field: sent with or without the request extensions
            extra["reasoning"] = dict(self.reasoning)
        if self.tools.get("functions"):  # standard Responses fields too
            extra["tools"] = [dict(t) for t in self.tools["functions"]]
            extra.update({k: v for k, v in self.tools.items() if k != "functions"})
        extra.update(self.extra_inputs)
        if self.chaining is not None:
            extra["store"] = True
        return extra

    def goodput_arg(self) -> str | None:
        """AIPerf --goodput 'tag:ms ...' for the per-request bounds, or None."""
        unknown = set(self.goodput) - set(GOODPUT_TAGS)
        if unknown:
            raise ValueError(
                f"workload point {self.point_id}: goodput bounds {sorted(unknown)} unknown "
                f"(known: {sorted(GOODPUT_TAGS)})"
            )
        return " ".join(f"{GOODPUT_TAGS[k]}:{v:g}" for k, v in sorted(self.goodput.items())) or None

    def entries(self) -> int:
        return self.num_dataset_entries or (self.request_count + self.warmup_request_count)


def _check(point: AiperfPoint) -> None:
    """Refuse a point AIPerf would run differently from what it says."""
    if (
        (point.concurrency is not None and point.concurrency < 1)
        or point.request_count < 1
        or point.osl < 1
        or (point.isl is not None and point.isl < 1)
    ):
        raise ValueError(
            f"workload point {point.point_id}: concurrency, request_count, isl, osl must be >= 1"
        )
    if point.concurrency is None and point.request_rate is None:
        raise ValueError(f"workload point {point.point_id}: needs a concurrency or a request_rate")
    if point.tools and not point.tools.get("functions"):
        raise ValueError(f"workload point {point.point_id}: tools needs its functions")
    if sum(x is not None for x in (point.isl, point.input_file, point.inputs_json)) != 1:
        raise ValueError(
            f"workload point {point.point_id}: exactly one of isl (synthetic), input_file or "
            "inputs_json"
        )
    check_sessions(point)
    if point.prompt_corpus is not None and (
        point.input_file is not None or point.prompt_corpus not in PROMPT_CORPORA
    ):
        raise ValueError(
            f"workload point {point.point_id}: prompt_corpus is one of {PROMPT_CORPORA}, for "
            "synthetic prompts only (not with input_file)"
        )
    if point.request_rate is not None and (
        point.request_rate <= 0 or point.arrival_pattern not in ARRIVAL_PATTERNS
    ):
        raise ValueError(
            f"workload point {point.point_id}: request_rate must be > 0 and arrival_pattern one of "
            f"{ARRIVAL_PATTERNS}"
        )


def build_command(
    point: AiperfPoint,
    client: ClientOptions,
    *,
    artifact_dir: str,
    phase_header: str | None = None,
    options: AiperfOptions | None = None,
) -> list[str]:
    """The exact argv. Every flag that changes the workload is explicit (no AIPerf defaults
    relied on)."""
    _check(point)
    options = AiperfOptions() if options is None else options
    cmd = [
        options.aiperf_bin,
        "profile",
        "--model",
        client.model_name,
        "--tokenizer",
        str(client.tokenizer),
        "--url",
        client.url,
        "--endpoint-type",
        "responses",
    ]
    if point.streaming:
        cmd.append("--streaming")
    cmd += _dataset_args(point)
    cmd += _load_args(point, phase_header)
    cmd += _output_args(point, client, options, artifact_dir)
    return cmd


def _dataset_args(point: AiperfPoint) -> list[str]:
    """The prompts (an input file or synthetic ones) and the outputs asked for."""
    if point.inputs_json is not None:
        cmd = ["--input-file", str(point.inputs_json), "--custom-dataset-type", "inputs_json"]
    elif point.input_file is not None:
        cmd = ["--input-file", str(point.input_file), "--custom-dataset-type", "single_turn"]
    else:
        cmd = [
            "--synthetic-input-tokens-mean",
            str(point.isl),
            "--synthetic-input-tokens-stddev",
            str(point.isl_stddev),
            "--num-dataset-entries",
            str(point.entries()),
        ]
        if point.prompt_corpus is not None:
            cmd += ["--prompt-corpus", point.prompt_corpus]
    return (
        cmd
        + session_args(point)
        + [
            "--output-tokens-mean",
            str(point.osl),
            "--output-tokens-stddev",
            str(point.osl_stddev),
            "--extra-inputs",
            json.dumps(point.extra_inputs_payload(), sort_keys=True, separators=(",", ":")),
            "--random-seed",
            str(point.seed),
            "--dataset-sampling-strategy",
            "sequential",
        ]
    )


def _load_args(point: AiperfPoint, phase_header: str | None) -> list[str]:
    """The load: concurrency or request rate, request counts, goodput and the phase header."""
    cmd = []
    if point.concurrency is not None:
        cmd += ["--concurrency", str(point.concurrency)]
    if point.request_rate is not None:
        cmd += [
            "--request-rate",
            f"{point.request_rate:g}",
            "--request-rate-mode",
            point.arrival_pattern,
        ]
    cmd += ["--request-count", str(point.request_count)]
    goodput = point.goodput_arg()
    if goodput:
        cmd += ["--goodput", goodput]
    if point.warmup_request_count > 0:
        cmd += ["--warmup-request-count", str(point.warmup_request_count)]
    if phase_header:
        cmd += ["--header", f"{PHASE_HEADER}:{phase_header}"]
    return cmd


def _output_args(
    point: AiperfPoint, client: ClientOptions, options: AiperfOptions, artifact_dir: str
) -> list[str]:
    """AIPerf's own workers, what it leaves out, what it exports and where."""
    cmd = [
        "--workers-max",
        str(options.workers_max),
        "--record-processors",
        str(options.record_processors),
        "--no-server-metrics",
        "--no-gpu-telemetry",
        "--ui-type",
        "none",
        "--export-level",
        client.export_level,
        "--export-outputs-json",
        "--request-timeout-seconds",
        f"{point.request_timeout_s:g}",
        "--artifact-dir",
        str(artifact_dir),
    ]
    if client.api_key:
        cmd += ["--api-key", client.api_key]
    return cmd


def command_to_str(cmd: list[str]) -> str:
    return shlex.join(cmd)
