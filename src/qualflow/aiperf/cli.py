"""`qualflow aiperf`: one pinned AIPerf point against a running server."""
from __future__ import annotations

import json

from qualflow.phases import aiperf_tag
from qualflow.aiperf.command import AiperfPoint, build_command, command_to_str


def main_aiperf(a) -> int:
    if a.point:
        point = AiperfPoint.from_dict(json.loads(a.point))
    else:
        point = AiperfPoint(point_id=a.point_id, concurrency=a.concurrency, isl=a.isl, osl=a.osl,
                            request_count=a.request_count, warmup_request_count=a.warmup_request_count,
                            seed=a.seed)
    if a.print_command:
        print(command_to_str(build_command(point, url=a.url, model_name=a.model, tokenizer_dir=a.tokenizer,
                                           artifact_dir=f"{a.out}/aiperf")))
        return 0
    from qualflow.aiperf.runner import run_point
    rec = run_point(point, url=a.url, model_name=a.model, tokenizer_dir=a.tokenizer, point_dir=a.out,
                    phase_header=aiperf_tag(point.point_id))
    print(json.dumps({"command": rec["command"], "exit_code": rec["exit_code"], **rec["verdict"]}, indent=2))
    return 0 if rec["verdict"]["ok"] else 1
