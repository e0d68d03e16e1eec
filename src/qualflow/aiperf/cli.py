"""`qualflow aiperf`: one pinned AIPerf point against a running server."""

from __future__ import annotations

import argparse
import json

from qualflow.aiperf.command import AiperfPoint, build_command, command_to_str
from qualflow.aiperf.options import ClientOptions
from qualflow.phases import aiperf_tag


def add_aiperf_args(s: argparse.ArgumentParser) -> None:
    s.add_argument("--url", required=True)
    s.add_argument("--model", default="qualflow")
    s.add_argument("--tokenizer", required=True, help="local tokenizer dir (the bundle dir)")
    s.add_argument(
        "--out", required=True, help="point directory (AIPerf artifacts go to OUT/aiperf)"
    )
    s.add_argument("--point", help="JSON of the workload point (overrides the flags below)")
    s.add_argument("--point-id", default="point")
    s.add_argument("--concurrency", type=int, default=1)
    s.add_argument("--isl", type=int, default=32)
    s.add_argument("--osl", type=int, default=16)
    s.add_argument("--request-count", type=int, default=16)
    s.add_argument("--warmup-request-count", type=int, default=4)
    s.add_argument("--seed", type=int, default=42)
    s.add_argument("--print-command", action="store_true", help="print the command and exit")


def main_aiperf(a) -> int:
    if a.point:
        point = AiperfPoint.from_dict(json.loads(a.point))
    else:
        point = AiperfPoint(
            point_id=a.point_id,
            concurrency=a.concurrency,
            isl=a.isl,
            osl=a.osl,
            request_count=a.request_count,
            warmup_request_count=a.warmup_request_count,
            seed=a.seed,
        )
    client = ClientOptions(url=a.url, model_name=a.model, tokenizer=a.tokenizer)
    if a.print_command:
        print(command_to_str(build_command(point, client, artifact_dir=f"{a.out}/aiperf")))
        return 0
    from qualflow.aiperf.runner import run_point

    rec = run_point(point, client, point_dir=a.out, phase_header=aiperf_tag(point.point_id))
    print(
        json.dumps(
            {"command": rec.command, "exit_code": rec.exit_code, **rec.verdict.to_dict()}, indent=2
        )
    )
    return 0 if rec.ok else 1
