"""The pinned `aiperf profile` command for one workload point."""
from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field

from qualflow.phases import PHASE_HEADER

PINNED_AIPERF = "0.13.0"


@dataclass(frozen=True)
class AiperfPoint:
    """One workload point: everything that changes the requests AIPerf sends."""
    point_id: str
    concurrency: int
    isl: int
    osl: int
    isl_stddev: int = 0
    osl_stddev: int = 0
    request_count: int = 16
    warmup_request_count: int = 4
    num_dataset_entries: int = 0          # 0: request_count + warmup_request_count
    seed: int = 42
    streaming: bool = True
    ignore_eos: bool = True
    min_tokens: int | None = None         # None: equal to osl (with ignore_eos: exact OSL)
    request_timeout_s: float = 600.0
    extra_inputs: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict) -> "AiperfPoint":
        known = set(cls.__dataclass_fields__)
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown workload point keys: {sorted(unknown)}")
        return cls(**d)

    def to_dict(self) -> dict:
        return asdict(self)

    def extra_inputs_payload(self) -> dict:
        extra = {"ignore_eos": bool(self.ignore_eos),
                 "min_tokens": int(self.osl if self.min_tokens is None else self.min_tokens),
                 "store": False}
        extra.update(self.extra_inputs)
        return extra

    def entries(self) -> int:
        return self.num_dataset_entries or (self.request_count + self.warmup_request_count)


def build_command(point: AiperfPoint, *, url: str, model_name: str, tokenizer_dir: str,
                  artifact_dir: str, phase_header: str | None = None,
                  workers_max: int = 1, record_processors: int = 1,
                  aiperf_bin: str = "aiperf") -> list[str]:
    """The exact argv. Every flag that changes the workload is explicit (no AIPerf defaults relied on)."""
    if point.concurrency < 1 or point.request_count < 1 or point.isl < 1 or point.osl < 1:
        raise ValueError(f"workload point {point.point_id}: concurrency, request_count, isl, osl must be >= 1")
    cmd = [
        aiperf_bin, "profile",
        "--model", model_name,
        "--tokenizer", str(tokenizer_dir),
        "--url", url,
        "--endpoint-type", "responses",
    ]
    if point.streaming:
        cmd.append("--streaming")
    cmd += [
        "--synthetic-input-tokens-mean", str(point.isl),
        "--synthetic-input-tokens-stddev", str(point.isl_stddev),
        "--output-tokens-mean", str(point.osl),
        "--output-tokens-stddev", str(point.osl_stddev),
        "--extra-inputs", json.dumps(point.extra_inputs_payload(), sort_keys=True, separators=(",", ":")),
        "--random-seed", str(point.seed),
        "--num-dataset-entries", str(point.entries()),
        "--dataset-sampling-strategy", "sequential",
        "--concurrency", str(point.concurrency),
        "--request-count", str(point.request_count),
    ]
    if point.warmup_request_count > 0:
        cmd += ["--warmup-request-count", str(point.warmup_request_count)]
    if phase_header:
        cmd += ["--header", f"{PHASE_HEADER}:{phase_header}"]
    cmd += [
        "--workers-max", str(workers_max),
        "--record-processors", str(record_processors),
        "--no-server-metrics", "--no-gpu-telemetry",
        "--ui-type", "none",
        "--export-level", "records",
        "--export-outputs-json",
        "--request-timeout-seconds", f"{point.request_timeout_s:g}",
        "--artifact-dir", str(artifact_dir),
    ]
    return cmd


def command_to_str(cmd: list[str]) -> str:
    return shlex.join(cmd)


def load_points(arg: str) -> list[dict]:
    """Workload points from a JSON string (starting with '[') or a file holding one."""
    text = arg if arg.lstrip().startswith("[") else open(arg).read()
    points = json.loads(text)
    for p in points:
        AiperfPoint.from_dict(p)  # validates keys
    return points
