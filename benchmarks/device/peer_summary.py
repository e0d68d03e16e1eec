"""Each stack's figures of a two-stack qualify, and ours-to-peer ratios per point
(benchmarks/device/peer_gpu.sh).

Reads the evidence of software key KEY (results/evidence/KEY/<model>/<profile>/): our server is the
stack with a build profile, the peer the one filed under profile `endpoint`. Writes OUT/summary.json
(per stack: each point's status and reasons, its summary row, startup; per point: the ratios) and
prints one Markdown table row per point:

    point | ours tok/s | peer tok/s | throughput ours/peer | TTFT p50 | first output token p50 | ITL
    p50

Beside the evidence's TTFT (AIPerf's: its first content event, reasoning included) it takes AIPerf's
time to first *output* token (the first non-reasoning content, `time_to_first_output_token` in
`profile_export_aiperf.json`): transformers serve opens every stream with a reasoning item even
with `--reasoning off`, so its TTFT is the time to that item, not to a generated token.

    python3 benchmarks/device/peer_summary.py KEY OUT [--results results]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd

from qualflow.aiperf.exports import read_summary

ENDPOINT_PROFILE = (
    "endpoint"  # the profile an endpoint's evidence is filed under (workflow/rules/common.smk)
)
FIGURES = (
    "output_token_throughput_tps",
    "client_ttft_ms_p50",
    "client_ttft_ms_p99",
    "aiperf_ttfo_ms_p50",
    "aiperf_ttfo_ms_p99",
    "client_itl_ms_p50",
    "client_itl_ms_p99",
    "error_rate",
    "status",
)
TTFO = "time_to_first_output_token"


def stack(d: Path, session: Path) -> dict:
    """One stack's evidence (`d`): status rows, summary rows (schema_version dropped, AIPerf's
    time to first output token added from the point's export under `session`) and startup."""
    runs, summ = pd.read_parquet(d / "runs.parquet"), pd.read_parquet(d / "summary.parquet")
    rows = summ.drop(columns=["schema_version"]).to_dict("records")
    for r in rows:
        block = (read_summary(session / "points" / r["point_id"] / "aiperf") or {}).get(TTFO) or {}
        r["aiperf_ttfo_ms_p50"], r["aiperf_ttfo_ms_p99"] = block.get("p50"), block.get("p99")
    return {
        "model": d.parent.name,
        "profile": d.name,
        "status": runs[["point_id", "status", "status_reasons"]].to_dict("records"),
        "startup": json.loads(runs["startup"].iloc[0]) if runs["startup"].iloc[0] else None,
        "summary": rows,
    }


def _num(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def ratios(ours: dict, peer: dict) -> dict[str, dict]:
    """Per point both stacks have: their figures, throughput ours/peer and latency peer/ours."""
    theirs = {r["point_id"]: r for r in peer["summary"]}
    out = {}
    for r in ours["summary"]:
        t = theirs.get(r["point_id"])
        if t is None:
            continue
        row = {"ours": {k: r[k] for k in FIGURES}, "peer": {k: t[k] for k in FIGURES}}
        a, b = _num(r["output_token_throughput_tps"]), _num(t["output_token_throughput_tps"])
        row["throughput_ours_over_peer"] = a / b if a and b else None
        for k in ("client_ttft_ms_p50", "aiperf_ttfo_ms_p50", "client_itl_ms_p50"):
            a, b = _num(r[k]), _num(t[k])
            row[f"{k}_peer_over_ours"] = b / a if a and b else None
        out[r["point_id"]] = row
    return out


def _fmt(x, spec: str) -> str:
    return "n/a" if _num(x) is None else format(x, spec)


def table(rows: dict[str, dict]) -> str:
    lines = [
        "| point | ours tok/s | peer tok/s | throughput ours / peer | TTFT p50 ours / peer "
        "| first output token p50 ours / peer | ITL p50 ours / peer |",
        "|---|---|---|---|---|---|---|",
    ]
    for pid, r in rows.items():
        o, p = r["ours"], r["peer"]
        lines.append(
            f"| {pid} | {_fmt(o['output_token_throughput_tps'], ',.0f')} | "
            f"{_fmt(p['output_token_throughput_tps'], ',.0f')} | "
            f"{_fmt(r['throughput_ours_over_peer'], '.1f')}× | "
            f"{_fmt(o['client_ttft_ms_p50'], '.1f')} / {_fmt(p['client_ttft_ms_p50'], '.1f')} ms | "
            f"{_fmt(o['aiperf_ttfo_ms_p50'], '.1f')} / {_fmt(p['aiperf_ttfo_ms_p50'], '.1f')} ms | "
            f"{_fmt(o['client_itl_ms_p50'], '.2f')} / {_fmt(p['client_itl_ms_p50'], '.2f')} ms |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("key")
    ap.add_argument("out", type=Path)
    ap.add_argument(
        "--results", type=Path, default=Path("results"), help="the workflow's results folder"
    )
    a = ap.parse_args(argv)
    ev, sess = a.results / "evidence" / a.key, a.results / "session" / a.key
    dirs = sorted(d for d in ev.glob("*/*") if (d / "summary.parquet").is_file())
    stacks = {f"{d.parent.name}/{d.name}": stack(d, sess / d.parent.name / d.name) for d in dirs}
    ours = [s for s in stacks.values() if s["profile"] != ENDPOINT_PROFILE]
    peer = [s for s in stacks.values() if s["profile"] == ENDPOINT_PROFILE]
    res = {
        "key": a.key,
        "stacks": stacks,
        "ratios": ratios(ours[0], peer[0]) if len(ours) == 1 and len(peer) == 1 else {},
    }
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "summary.json").write_text(json.dumps(res, indent=2, default=str))
    for name, s in stacks.items():
        for r in s["status"]:
            print(f"{name} {r['point_id']}: {r['status']} ({r['status_reasons']})")
    if not res["ratios"]:
        print(
            f"no ratios: evidence of {sorted(stacks)} (one stack of ours and one endpoint wanted)",
            file=sys.stderr,
        )
        return 1
    print(table(res["ratios"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
