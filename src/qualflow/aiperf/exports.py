"""Reading and judging AIPerf 0.13 export files (profile_export.jsonl, profile_export_aiperf.json,
inputs.json, outputs.json, .aiperf_results_ready.json).

Success is judged from these files, not from AIPerf's exit code: 0.13.0 exits 0 when some requests
failed, on Ctrl-C and on a threshold abort."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from qualflow.files import sha256_file

RECORDS = "profile_export.jsonl"
SUMMARY = "profile_export_aiperf.json"
READY = ".aiperf_results_ready.json"
INPUTS = "inputs.json"
OUTPUTS = "outputs.json"

# client metric tags copied into the requests table (value in the exported unit, ms or tokens)
CLIENT_METRICS = (
    "request_latency",
    "time_to_first_token",
    "time_to_second_token",
    "inter_token_latency",
    "decode_duration",
    "input_sequence_length",
    "output_sequence_length",
    "output_token_count",
    "osl_mismatch_diff_pct",
    "output_token_throughput_per_user",
    "usage_prompt_tokens",
    "usage_completion_tokens",
    # with reasoning events (response.reasoning_text.delta): the first non-reasoning
    # content event's time, and the reasoning text's tokens (client tokenizer)
    "time_to_first_output_token",
    "reasoning_token_count",
    "usage_prompt_cache_read_tokens",  # usage.input_tokens_details.cached_tokens
)


def sha256_text(s: str | None) -> str | None:
    return None if s is None else hashlib.sha256(s.encode()).hexdigest()


class ExportError(ValueError):
    """An export file that cannot be read; the message names the file and line."""


def _jsonl(path: Path, problems: list[str] | None) -> list[tuple[int, dict]]:
    """(line index, record) of a JSONL export. A truncated *last* line (the writer was stopped
    mid-line) is left out and said so in `problems`; a bad line elsewhere is an ExportError."""
    lines = [
        (n, ln) for n, ln in enumerate(path.read_text(errors="replace").splitlines()) if ln.strip()
    ]
    out = []
    for i, (n, line) in enumerate(lines):
        try:
            out.append((n, json.loads(line)))
        except json.JSONDecodeError as e:
            if i < len(lines) - 1:
                raise ExportError(f"{path}:{n + 1}: not a JSON record: {e}") from None
            if problems is not None:
                problems.append(
                    f"{path.name}: the last line ({n + 1}) is truncated and was left out"
                )
    return out


def read_records(artifact_dir: str | Path, problems: list[str] | None = None) -> list[dict]:
    """One flat dict per line of profile_export.jsonl (warmup and profiling, success and error)."""
    rows = []
    path = Path(artifact_dir) / RECORDS
    if not path.exists():
        return rows
    for n, rec in _jsonl(path, problems):
        md = rec.get("metadata", {})
        metrics = rec.get("metrics", {}) or {}
        err = rec.get("error")
        row = {
            "request_id": md.get("x_request_id"),
            "benchmark_phase": md.get("benchmark_phase"),
            "conversation_id": md.get("conversation_id"),
            "turn_index": md.get("turn_index"),
            "session_num": md.get("session_num"),
            "profiling_index": md.get("profiling_index"),
            "credit_issued_ns": md.get("credit_issued_ns"),
            "request_start_ns": md.get("request_start_ns"),
            "request_ack_ns": md.get("request_ack_ns"),
            "request_end_ns": md.get("request_end_ns"),
            "client_cancelled": bool(md.get("was_cancelled", False)),
            "client_error": None if not err else json.dumps(err, sort_keys=True),
            "client_error_code": None if not err else err.get("code"),
            "line_no": n,
        }
        for tag in CLIENT_METRICS:
            m = metrics.get(tag)
            row[tag] = (
                None
                if not isinstance(m, dict) or isinstance(m.get("value"), list)
                else m.get("value")
            )
        rows.append(row)
    return rows


def read_summary(artifact_dir: str | Path) -> dict | None:
    path = Path(artifact_dir) / SUMMARY
    return json.loads(path.read_text()) if path.exists() else None


def read_inputs(artifact_dir: str | Path) -> dict[tuple[str, int], dict]:
    """(conversation_id, turn_index) -> exact payload AIPerf sent (from inputs.json)."""
    path = Path(artifact_dir) / INPUTS
    out: dict[tuple[str, int], dict] = {}
    if not path.exists():
        return out
    for sess in json.loads(path.read_text()).get("data", []):
        for i, payload in enumerate(sess.get("payloads", [])):
            out[(sess.get("session_id"), i)] = payload
    return out


def payloads_sha256(artifact_dir: str | Path) -> str | None:
    """sha256 of every payload of inputs.json with the `model` field left out: the same requests
    sent to two stacks that name the model differently (a cross-stack comparison's dataset
    identity)."""
    inputs = read_inputs(artifact_dir)
    if not inputs:
        return None
    rows = [
        [k[0], k[1], {f: v for f, v in p.items() if f != "model"}]
        for k, p in sorted(inputs.items())
    ]
    return hashlib.sha256(
        json.dumps(rows, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def read_outputs(artifact_dir: str | Path) -> dict[str, str]:
    """x_request_id -> response text (outputs.json, written with --export-outputs-json)."""
    path = Path(artifact_dir) / OUTPUTS
    if not path.exists():
        return {}
    return {
        d.get("x_request_id"): d.get("response_text")
        for d in json.loads(path.read_text()).get("data", [])
        if d.get("x_request_id")
    }


def payload_text(payload: dict | None) -> str | None:
    """The user text of a Responses payload (string input or message list)."""
    if not payload:
        return None
    inp = payload.get("input")
    if isinstance(inp, str):
        return inp
    parts = []
    for item in inp or []:
        c = item.get("content") if isinstance(item, dict) else None
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, list):
            parts += [p.get("text", "") for p in c if isinstance(p, dict)]
    return "\n".join(parts)


def _stat(summary: dict, tag: str, key: str = "avg", default=None):
    block = summary.get(tag)
    return block.get(key, default) if isinstance(block, dict) else default


@dataclass
class Verdict:
    ok: bool
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    osl_mismatch_count: float | None = None
    expected_requests: int = 0
    profiling_records: int = 0
    warmup_records: int = 0
    error_records: int = 0
    request_count: float | None = None
    dataset_sha256: str | None = None
    random_seed: int | None = None
    aiperf_version: str | None = None
    exit_code: int | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict) -> Verdict:
        """A verdict as `to_dict` wrote it, or a part of one (absent keys keep their defaults)."""
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**{"ok": False, **known})


def judge_run(
    artifact_dir: str | Path,
    *,
    expected_requests: int,
    expected_warmup: int = 0,
    expected_seed: int | None = None,
    exit_code: int | None = None,
    check_osl: bool = False,
) -> Verdict:
    """Decide whether an AIPerf run qualifies, from its export files only."""
    d = Path(artifact_dir)
    v = Verdict(ok=False, expected_requests=expected_requests, exit_code=exit_code)
    reasons = v.reasons
    ready = d / READY
    if not ready.exists():
        reasons.append("no .aiperf_results_ready.json (export incomplete, or every request failed)")
    else:
        r = json.loads(ready.read_text())
        if not r.get("ready", False) or r.get("partial", False) or r.get("was_cancelled", False):
            reasons.append(f"ready marker says {r}")
    s = read_summary(d)
    if s is None:
        reasons.append(f"no {SUMMARY}")
    else:
        v.aiperf_version = s.get("aiperf_version")
        v.random_seed = (s.get("run_info") or {}).get("random_seed")
        if s.get("was_cancelled"):
            reasons.append("run was cancelled (was_cancelled=true)")
        if s.get("is_complete") is False:
            reasons.append("run incomplete (is_complete=false)")
        v.request_count = _stat(s, "request_count")
        errs = _stat(s, "error_request_count", default=0) or 0
        if errs:
            reasons.append(f"{errs:g} requests failed: {s.get('error_summary')}")
        if v.request_count != expected_requests:
            reasons.append(f"request_count {v.request_count} != expected {expected_requests}")
        v.osl_mismatch_count = _stat(s, "osl_mismatch_count", default=0) or 0
        if v.osl_mismatch_count:
            # The client re-tokenizes the output text; with a model whose detokenized text does not
            # re-tokenize to the same ids (random weights) this differs from the generated count.
            # The authoritative OSL check is the server's output_tokens in the join; opt in to this
            # one.
            msg = (
                f"osl_mismatch_count {v.osl_mismatch_count:g}: client-tokenized OSL differs from "
                "max_output_tokens by > 5% on some requests"
            )
            (reasons if check_osl else v.warnings).append(msg)
        if expected_seed is not None and v.random_seed != expected_seed:
            reasons.append(f"random_seed {v.random_seed} != expected {expected_seed}")
    try:
        records = read_records(d, problems=v.warnings)
    except ExportError as e:
        records = []
        reasons.append(str(e))
    v.profiling_records = sum(r["benchmark_phase"] == "profiling" for r in records)
    v.warmup_records = sum(r["benchmark_phase"] == "warmup" for r in records)
    v.error_records = sum(r["client_error"] is not None for r in records)
    if v.profiling_records != expected_requests:
        reasons.append(
            f"{v.profiling_records} profiling records in {RECORDS}, expected {expected_requests}"
        )
    if v.warmup_records != expected_warmup:
        reasons.append(
            f"{v.warmup_records} warmup records in {RECORDS}, expected {expected_warmup}"
        )
    if v.error_records:
        reasons.append(f"{v.error_records} error records in {RECORDS}")
    ids = [r["request_id"] for r in records]
    if len(set(ids)) != len(ids) or None in ids:
        reasons.append("request ids in profile_export.jsonl are missing or not unique")
    if (d / INPUTS).exists():
        v.dataset_sha256 = sha256_file(d / INPUTS)
    else:
        reasons.append(f"no {INPUTS} (dataset identity unknown)")
    v.ok = not reasons
    return v
