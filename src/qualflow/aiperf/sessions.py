"""The session side of a workload point: AIPerf multi-turn sessions (the history re-sent each turn,
or chained with previous_response_id), recorded agent sessions sent verbatim (inputs_json), and a
shared system prompt; and the rendering of a committed inputs_json file for one run.

A committed inputs_json file names no model, stream mode or output limit (see
workloads/agent/README.md): `render_inputs_json` sets them per point, with the point's extra
inputs, into the copy AIPerf sends.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# the point is qualflow.aiperf.command.AiperfPoint, which imports this module
AiperfPoint = Any

CHAININGS = ("previous_response_id",)


def check_sessions(point: AiperfPoint) -> None:
    """Refuse session settings AIPerf would not run as they read."""
    at = f"workload point {point.point_id}"
    if point.conversation_num is not None and (
        point.conversation_num < 1 or point.conversation_turn_mean < 1
    ):
        raise ValueError(f"{at}: conversation_num and conversation_turn_mean must be >= 1")
    if point.chaining is not None:
        if point.chaining not in CHAININGS:
            raise ValueError(f"{at}: chaining is one of {CHAININGS}")
        if point.conversation_num is None:
            raise ValueError(f"{at}: chaining needs sessions (conversation_num)")
    if point.inputs_json is not None and (
        point.conversation_num is not None or point.shared_system_prompt_length is not None
    ):
        raise ValueError(
            f"{at}: inputs_json sessions come from the file: no conversation_num or "
            "shared_system_prompt_length with it"
        )
    if point.shared_system_prompt_length is not None and point.shared_system_prompt_length < 1:
        raise ValueError(f"{at}: shared_system_prompt_length must be >= 1")


def session_args(point: AiperfPoint) -> list[str]:
    """AIPerf's session flags of the point ([] for a single-turn point)."""
    cmd = []
    if point.conversation_num is not None:
        cmd += [
            "--conversation-num",
            str(point.conversation_num),
            "--conversation-turn-mean",
            str(point.conversation_turn_mean),
            "--conversation-turn-stddev",
            str(point.conversation_turn_stddev),
        ]
    if point.chaining is not None:  # store:true is in the extra inputs; AIPerf requires this
        cmd.append("--use-server-token-count")
    if point.shared_system_prompt_length is not None:
        cmd += ["--shared-system-prompt-length", str(point.shared_system_prompt_length)]
    return cmd


def render_inputs_json(point: AiperfPoint, model_name: str, out: str | Path) -> Path:
    """The point's inputs_json file as this run sends it: every payload with the model, stream
    mode, output limit and the point's extra inputs set (the file's own keys are kept otherwise)."""
    data = json.loads(Path(point.inputs_json).read_text())
    fixed = {
        "model": model_name,
        "stream": point.streaming,
        "max_output_tokens": point.osl,
        **point.extra_inputs_payload(),
    }
    for session in data["data"]:
        session["payloads"] = [{**p, **fixed} for p in session["payloads"]]
    out = Path(out)
    out.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n")
    return out
