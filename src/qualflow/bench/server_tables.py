"""The tables `qualflow bench server` prints: the Task, server and ceiling side by side, where a
server request's time went, this run against a baseline, the ceiling per AIPerf workers pair, and
one line per point of a written result (`brief`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .results import OLD_DEFAULTS, detail


def _n(v, fmt="{:,.0f}") -> str:
    return "-" if v is None else fmt.format(v)


def _pc(v) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def api_processes(res: dict) -> str:
    return (
        "API processes (--api-server-count): server "
        f"{res.get('api_servers', OLD_DEFAULTS['api_servers'])}, ceiling "
        f"{res.get('ceiling_api_servers', OLD_DEFAULTS['ceiling_api_servers'])}"
    )


def print_side_by_side(res: dict, points: list[int]) -> None:
    print(f"\n{api_processes(res)}")
    print(
        f"{'point':>6} | {'Task tok/s':>10} | {'server tok/s':>12} {'/Task':>5} | "
        f"{'ceiling tok/s':>13} {'server/ceil':>11} | ITL p50 Task / server / ceiling | TTFT p50 "
        "server / ceiling | gap p50"
    )
    for c in points:
        r = res[f"c{c}"]
        print(
            f"{'c' + str(c):>6} | {_n(r['task_output_tok_per_s']):>10} | "
            f"{_n(r['server_output_tok_per_s']):>12} {_pc(r['server_share_of_task']):>5} | "
            f"{_n(r['ceiling_output_tok_per_s']):>13} {_pc(r['server_share_of_ceiling']):>11} | "
            f"{_n(r['task_itl_ms_p50'], '{:.2f}')} / {_n(r['itl_ms_p50'], '{:.2f}')} / "
            f"{_n(r['ceiling_itl_ms_p50'], '{:.2f}')} ms | {_n(r['ttft_ms_p50'], '{:.1f}')} / "
            f"{_n(r['ceiling_ttft_ms_p50'], '{:.1f}')} ms | "
            f"{_n(r['client_minus_task_ms_p50'], '{:.2f}')} ms  (errors "
            f"{r['errors']:.0f}/{r['ceiling_errors'] or 0:.0f})"
        )
    print(
        "\nwhere a server request's time went (p50, ms): HTTP in | queue | Task TTFT | Task "
        "ms/token | HTTP out | client beyond HTTP"
    )
    for c in points:
        b = res[f"c{c}"]["server_breakdown"]
        print(
            f"{'c' + str(c):>6} | "
            + " | ".join(
                _n(b[f"{k}_p50"], "{:.2f}")
                for k in (
                    "http_in_ms",
                    "queue_ms",
                    "task_ttft_ms",
                    "task_itl_ms",
                    "http_out_ms",
                    "client_beyond_http_ms",
                )
            )
        )


def print_against(vs: dict, name: str) -> None:
    print(f"\nthis version against {name} (head / base):")
    for point, figs in vs.items():
        cells = []
        for k, label in (
            ("task_output_tok_per_s", "Task"),
            ("server_output_tok_per_s", "server"),
            ("ceiling_output_tok_per_s", "ceiling"),
        ):
            f = figs[k]
            cells.append(f"{label} {_n(f['head'])} / {_n(f['base'])} ({_n(f['ratio'], '{:.2f}x')})")
        sh = figs["server_share_of_task"]
        cells.append(f"server share of Task {_pc(sh['head'])} / {_pc(sh['base'])}")
        print(f"  {point}: " + "; ".join(cells))


def _share_cell(r: dict) -> str:
    return f"{_n(r['output_tok_per_s'])} ({_pc(r['share_of_best'])})"


def print_scaling(res: dict, grid: list[str], points: list[int]) -> None:
    """The ceiling's output tok/s per workers:record_processors pair and point, with its share of
    the best at that point."""
    print(
        f"\nceiling with {res.get('ceiling_api_servers', OLD_DEFAULTS['ceiling_api_servers'])} API "
        "processes"
    )
    print(
        f"{'workers:rp':>10} "
        + " ".join(f"{'c' + str(c) + ' tok/s (of best)':>24}" for c in points)
    )
    for pair in grid:
        w, rp = (int(x) for x in pair.split(":"))
        rows = {
            r["concurrency"]: r
            for r in res["runs"]
            if (r["workers_max"], r["record_processors"]) == (w, rp)
        }
        print(f"{pair:>10} " + " ".join(f"{_share_cell(rows[c]):>24}" for c in points))


def brief(path: str) -> None:
    res = detail(json.loads(Path(path).read_text()))
    for key in sorted((k for k in res if re.fullmatch(r"c\d+", k)), key=lambda k: int(k[1:])):
        r, b = res[key], res[key].get("server_breakdown", {})
        print(
            f"  {key}: Task {_n(r['task_output_tok_per_s'])} server "
            f"{_n(r['server_output_tok_per_s'])} tok/s, ITL p50 Task/server "
            f"{_n(r['task_itl_ms_p50'], '{:.2f}')}/{_n(r['itl_ms_p50'], '{:.2f}')} ms, gap p50 "
            f"{_n(r['client_minus_task_ms_p50'], '{:.2f}')} ms (HTTP in "
            f"{_n(b.get('http_in_ms_p50'), '{:.2f}')}, queue {_n(b.get('queue_ms_p50'), '{:.2f}')}"
            f", HTTP out {_n(b.get('http_out_ms_p50'), '{:.2f}')}, client beyond HTTP "
            f"{_n(b.get('client_beyond_http_ms_p50'), '{:.2f}')})",
            flush=True,
        )
