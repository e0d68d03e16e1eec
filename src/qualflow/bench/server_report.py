"""What `qualflow bench server` reports from the runs it made: per point, the Task's, the server's
and the harness ceiling's figures side by side, where a server request's time went (the split of
the client-Task gap), and this run against a committed baseline of the same device and settings;
the ceiling's figures per AIPerf workers:record_processors pair (--mode scaling); one line per
point of a written result (`brief`); the printed tables are server_tables.py's.

WORK holds task_level.json, server/ (timing.jsonl, aiperf_c<C>/) and ceiling/ (aiperf_c<C>/), or
scaling/w<W>_rp<RP>/aiperf_c<C>/. The figures are AIPerf's own (profile_export_aiperf.json); the
client-minus-Task gap pairs each profiling record with the server's timing record by request id."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

from . import results as results_schema
from .server_tables import print_against, print_scaling, print_side_by_side

RESULTS = Path("benchmarks/results")  # the committed results, a folder per device (device_tag)


def _aiperf(d: Path) -> dict | None:
    f = d / "profile_export_aiperf.json"
    return json.loads(f.read_text()) if f.exists() else None


def _stat(j: dict | None, tag: str, key: str = "avg"):
    b = (j or {}).get(tag)
    return b.get(key) if isinstance(b, dict) else None


def matched(d: Path, records: dict) -> list[tuple[dict, dict]]:
    """(AIPerf's profiling record, the server's timing record) per request of the point's export
    that the timing log has; AIPerf's records read by the project's reader
    (qualflow.aiperf.exports)."""
    from qualflow.aiperf.exports import read_records

    return [
        (r, records[r["request_id"]])
        for r in read_records(d)
        if r["benchmark_phase"] == "profiling" and r["request_id"] in records
    ]


def _gaps(pairs: list[tuple[dict, dict]]) -> list[float]:
    """Client latency minus the Task's wall time, per request, sorted."""
    return sorted(
        r["request_latency"] - rec["public_task_call_wall_ns"] / 1e6
        for r, rec in pairs
        if r["request_latency"] is not None
    )


def _ms(a: int | None, b: int | None) -> float | None:
    return (b - a) / 1e6 if a is not None and b is not None else None


def breakdown(pairs: list[tuple[dict, dict]]) -> dict:
    """Where a profiling request's time went, p50 over the requests the server's timing log
    matches: HTTP arrival -> Task submit, submit -> first scheduled, the Task's TTFT and
    per-token decode time, the Task's end -> last byte sent, and the client's latency beyond the
    server's HTTP time."""
    parts: dict[str, list[float]] = {
        k: []
        for k in (
            "http_in_ms",
            "queue_ms",
            "task_ttft_ms",
            "task_itl_ms",
            "http_out_ms",
            "client_beyond_http_ms",
        )
    }
    for r, rec in pairs:
        sub, first, fin = rec.get("submitted_ns"), rec.get("first_token_ns"), rec.get("finished_ns")
        vals = {
            "http_in_ms": _ms(rec.get("http_received_ns"), sub),
            "queue_ms": _ms(sub, rec.get("first_scheduled_ns")),
            "task_ttft_ms": _ms(sub, first),
            "http_out_ms": _ms(fin, rec.get("http_sent_ns")),
            "task_itl_ms": _ms(first, fin) / (rec["output_tokens"] - 1)
            if first and fin and (rec.get("output_tokens") or 0) > 1
            else None,
        }
        http, lat = _ms(rec.get("http_received_ns"), rec.get("http_sent_ns")), r["request_latency"]
        vals["client_beyond_http_ms"] = lat - http if http is not None and lat is not None else None
        for k, v in vals.items():
            if v is not None:
                parts[k].append(v)
    return {f"{k}_p50": _pct(sorted(v), 0.5) for k, v in parts.items()}


def _pct(a: list[float], q: float):
    return a[min(len(a) - 1, int(len(a) * q))] if a else None


def _ratio(a, b):
    return a / b if a and b else None


def point_figures(work: Path, c: int, task: dict, records: dict) -> dict:
    """One point: the Task's, the server's and the ceiling's figures (the server's keys as
    committed)."""
    srv, ceil, t = (
        _aiperf(work / "server" / f"aiperf_c{c}"),
        _aiperf(work / "ceiling" / f"aiperf_c{c}"),
        task.get(f"c{c}", {}),
    )
    pairs = matched(work / "server" / f"aiperf_c{c}", records)
    gaps = _gaps(pairs)
    s_tps, c_tps, t_tps = (
        _stat(srv, "output_token_throughput"),
        _stat(ceil, "output_token_throughput"),
        t.get("output_tok_per_s"),
    )
    return {
        "server_output_tok_per_s": s_tps,
        "task_output_tok_per_s": t_tps,
        "server_share_of_task": _ratio(s_tps, t_tps),
        "ttft_ms_p50": _stat(srv, "time_to_first_token", "p50"),
        "itl_ms_p50": _stat(srv, "inter_token_latency", "p50"),
        "task_ttft_ms_p50": t.get("ttft_ms_p50"),
        "task_itl_ms_p50": t.get("itl_ms_p50"),
        "errors": _stat(srv, "error_request_count") or 0,
        "requests": _stat(srv, "request_count"),
        "matched": len(gaps),
        "client_minus_task_ms_p50": _pct(gaps, 0.5),
        "client_minus_task_ms_p99": _pct(gaps, 0.99),
        "ceiling_output_tok_per_s": c_tps,
        "server_share_of_ceiling": _ratio(s_tps, c_tps),
        "task_share_of_ceiling": _ratio(t_tps, c_tps),
        "ceiling_ttft_ms_p50": _stat(ceil, "time_to_first_token", "p50"),
        "ceiling_itl_ms_p50": _stat(ceil, "inter_token_latency", "p50"),
        "ceiling_errors": _stat(ceil, "error_request_count") or 0,
        "ceiling_requests": _stat(ceil, "request_count"),
        "server_breakdown": breakdown(pairs),
    }


def device_tag(name: str) -> str:
    """The folder of a device's results: 'NVIDIA H200' -> 'NVIDIA-H200'."""
    return results_schema.gpu_dir(name) or "cpu"


def newest_baseline(tag: str, settings: dict, root: Path | None = None) -> Path | None:
    """The newest committed server result in the device's folder (RESULTS/<tag>/) at the same ISL /
    OSL, serve flags, request sampling and API processes (a result that predates a setting ran with
    OLD_DEFAULTS): by the date its name starts with, then by the time it records (`recorded_utc`),
    then by modification time."""

    def same(d: dict) -> bool:
        return all(
            str(d.get(k, results_schema.OLD_DEFAULTS.get(k, settings.get(k))))
            == str(settings.get(k, results_schema.OLD_DEFAULTS.get(k)))
            for k in (
                "isl",
                "osl",
                "serve_flags",
                "request_sampling",
                "api_servers",
                "ceiling_api_servers",
            )
        )

    root = RESULTS if root is None else root
    found = (
        [
            (p, r["detail"])
            for p, r in results_schema.runs(root, tag, "server")
            if re.match(r"\d{4}-\d\d-\d\d-", p.name) and same(r["detail"])
        ]
        if (root / tag).is_dir()
        else []
    )
    return (
        max(
            found,
            key=lambda f: (f[0].name[:10], f[1].get("recorded_utc") or "", f[0].stat().st_mtime),
        )[0]
        if found
        else None
    )


def against(res: dict, base: dict, points: list[int]) -> dict:
    """This run's figures over the baseline's, per point (None where either side lacks one)."""
    keys = (
        "task_output_tok_per_s",
        "server_output_tok_per_s",
        "server_share_of_task",
        "ceiling_output_tok_per_s",
        "itl_ms_p50",
        "client_minus_task_ms_p50",
    )
    out = {}
    for c in points:
        now, was = res.get(f"c{c}", {}), base.get(f"c{c}") or {}
        out[f"c{c}"] = {
            k: {"base": was.get(k), "head": now.get(k), "ratio": _ratio(now.get(k), was.get(k))}
            for k in keys
        }
    return out


def report(
    work: str,
    out: str,
    name: str,
    baseline: str,
    points: list[int],
    settings: dict,
    root: Path | None = None,
) -> dict:
    work_p = Path(work)
    task = (
        json.loads((work_p / "task_level.json").read_text())
        if (work_p / "task_level.json").exists()
        else {}
    )
    timing = work_p / "server" / "timing.jsonl"
    records = (
        {r["request_id"]: r for r in map(json.loads, timing.read_text().splitlines())}
        if timing.exists()
        else {}
    )
    res = {
        "recorded_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **settings,
        "task_load_timing": task.get("load_timing"),
    }
    res.update({f"c{c}": point_figures(work_p, c, task, records) for c in points})
    base_path = (
        Path(baseline)
        if baseline
        else newest_baseline(device_tag(settings.get("device_name", "cpu")), settings, root)
    )
    print_side_by_side(res, points)
    if base_path is not None and base_path.exists():
        res["baseline"] = base_path.name
        res["vs_baseline"] = against(
            res, results_schema.detail(json.loads(base_path.read_text())), points
        )
        print_against(res["vs_baseline"], base_path.name)
    else:
        print("\nno committed result of this device to compare with")
    device = settings.get("device_name", "cpu")
    rec = results_schema.record(
        "server",
        settings.get("preset", ""),
        device,
        res["recorded_utc"],
        {"git_sha": results_schema.git_sha()},
        res,
    )
    Path(out, name).write_text(json.dumps(rec, indent=1) + "\n")
    print(f"\nwrote {Path(out, name)}")
    return res


def scaling(
    work: str, out: str, name: str, grid: list[str], points: list[int], settings: dict
) -> dict:
    """The ceiling's output tok/s (and ITL p50, errors) per workers:record_processors pair and
    point, and each pair's share of the best at that point."""
    res = {
        "recorded_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **settings,
        "runs": [],
    }
    for pair in grid:
        w, rp = pair.split(":")
        for c in points:
            j = _aiperf(Path(work) / "scaling" / f"w{w}_rp{rp}" / f"aiperf_c{c}")
            res["runs"].append(
                {
                    "workers_max": int(w),
                    "record_processors": int(rp),
                    "concurrency": c,
                    "output_tok_per_s": _stat(j, "output_token_throughput"),
                    "itl_ms_p50": _stat(j, "inter_token_latency", "p50"),
                    "ttft_ms_p50": _stat(j, "time_to_first_token", "p50"),
                    "errors": _stat(j, "error_request_count") or 0,
                    "requests": _stat(j, "request_count"),
                }
            )
    for c in points:
        best = max(
            (r["output_tok_per_s"] or 0 for r in res["runs"] if r["concurrency"] == c), default=0
        )
        for r in res["runs"]:
            if r["concurrency"] == c:
                r["share_of_best"] = _ratio(r["output_tok_per_s"], best)
    print_scaling(res, grid, points)
    Path(out, name).write_text(json.dumps(res, indent=2) + "\n")
    print(f"\nwrote {Path(out, name)}")
    return res
