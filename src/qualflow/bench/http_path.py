"""`qualflow bench server --mode http`: the HTTP part of a c1 request under each ASGI server of
--http-servers, on the same machine in one run, alternating, with repeats.

Each round starts `qualflow serve --engine synthetic --step-ms <ceiling-step-ms> --http-server S`
(no model: the engine costs ~nothing) for each server in turn and sends --http-requests streamed
c1 Responses requests (ISL-sized prompt, OSL tokens, ignore_eos), after a few unmeasured ones. The
server's timing records split each request: HTTP in (arrival -> Task submit), queue, HTTP out (the
Task's end -> last byte sent); the client's latency beyond the server's HTTP time is the client's
own part. The server runs on all but the last of the CPUs this process may use and the client on
that last one (--http-pin, where there are two or more): a client on the server's CPU takes it over
at each write it is woken by, and the write's time then holds the client's work (on a 2-core
machine, 0.8 ms of a 1.3 ms HTTP out). Prints the p50 of each per server and round, then over all
rounds, and writes <out>/<date>-http.json in the results schema (kind http)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import statistics
import time
import uuid
from pathlib import Path

from . import results as results_schema
from .config import ServerBenchConfig
from .server_procs import Server, extra_inputs

PARTS = ("http_in_ms", "queue_ms", "http_out_ms", "http_part_ms", "client_beyond_http_ms")
WARMUP = 10


def _request(client, url: str, body: dict) -> tuple[str, float]:
    """One streamed request, read to its end: (its request id, the client's latency in ms). It
    carries its own X-Request-ID, as AIPerf's requests do, so the server takes the path it takes
    for them (it makes an id only for a request without one)."""
    headers = {"X-Request-ID": str(uuid.uuid4())}
    t0 = time.perf_counter()
    with client.stream("POST", url, json=body, headers=headers) as r:
        for _ in r.iter_bytes():
            pass
        r.raise_for_status()
    return r.headers["x-request-id"], (time.perf_counter() - t0) * 1e3


def split(rec: dict, latency_ms: float) -> dict:
    """Where one request's time went, from its final timing record and the client's latency."""

    def ms(a: str, b: str) -> float:
        return (rec[b] - rec[a]) / 1e6

    http_in, http_out = ms("http_received_ns", "submitted_ns"), ms("finished_ns", "http_sent_ns")
    return {
        "http_in_ms": http_in,
        "queue_ms": ms("submitted_ns", "first_scheduled_ns"),
        "http_out_ms": http_out,
        "http_part_ms": http_in + http_out,
        "client_beyond_http_ms": latency_ms - ms("http_received_ns", "http_sent_ns"),
    }


def _records(log: Path) -> dict:
    rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return {r["request_id"]: r for r in rows}


def cpu_sets(pin: bool) -> tuple[set[int], set[int]] | None:
    """(the server's CPUs, the client's) when pinning: the client on the last CPU this process may
    use, the server on the others; None where pinning is off or only one CPU is there."""
    if not pin or not hasattr(os, "sched_getaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    return (set(cpus[:-1]), {cpus[-1]}) if len(cpus) > 1 else None


def start_server(cfg: ServerBenchConfig, bundle: Path, folder: Path, http_server: str) -> Server:
    """The round's server, on the server's CPUs where pinning applies (it and its children inherit
    them from this thread, which then moves to the client's CPU)."""
    flags = ["--engine", "synthetic", "--step-ms", f"{cfg.ceiling_step_ms:g}", "--device", "cpu"]
    sets = cpu_sets(cfg.http_pin)
    if sets is not None:
        os.sched_setaffinity(0, sets[0])
    try:
        return Server(cfg, bundle, folder, 1, 1, [*flags, "--http-server", http_server])
    finally:
        if sets is not None:
            os.sched_setaffinity(0, sets[1])


def one_round(cfg: ServerBenchConfig, bundle: Path, folder: Path, http_server: str) -> list[dict]:
    """One server's requests of one round: their splits, in order."""
    import httpx

    mine = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    server = start_server(cfg, bundle, folder, http_server)
    body = {
        "model": "speed",
        "input": "hello " * max(1, cfg.isl - 8),
        "max_output_tokens": cfg.osl,
        "stream": True,
        **json.loads(extra_inputs(cfg)),
    }
    url, done = f"http://127.0.0.1:{cfg.port}/v1/responses", []
    try:
        with httpx.Client(timeout=60) as client:
            for i in range(WARMUP + cfg.http_requests):
                rid, lat = _request(client, url, body)
                if i >= WARMUP:
                    done.append((rid, lat))
            time.sleep(0.2)  # the last record's http_sent_ns is written after the last byte
    finally:
        server.stop()
        if mine is not None:
            os.sched_setaffinity(0, mine)
    recs = _records(folder / "timing.jsonl")
    return [split(recs[rid], lat) for rid, lat in done if recs.get(rid, {}).get("http_sent_ns")]


def p50s(rows: list[dict]) -> dict:
    return {f"{k}_p50": statistics.median(r[k] for r in rows) if rows else None for k in PARTS}


def http_path(cfg: ServerBenchConfig, bundle: Path, device_name: str) -> dict:
    servers = cfg.http_servers.split()
    rows: dict[str, list[dict]] = {s: [] for s in servers}
    rounds = []
    for n in range(cfg.http_rounds):
        for s in servers if n % 2 == 0 else servers[::-1]:  # alternated: ABBA...
            got = one_round(cfg, bundle, Path(cfg.work) / "http" / f"{s}-{n}", s)
            rows[s] += got
            rounds.append({"round": n, "http_server": s, "requests": len(got), **p50s(got)})
            print(_line(f"round {n} {s}", rounds[-1]), flush=True)
    res = {
        "recorded_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device_name": device_name,
        "cpus": _cpus_line(cpu_sets(cfg.http_pin)),
        **{k: str(v) for k, v in dataclasses.asdict(cfg).items() if k in SETTINGS},
        "rounds": rounds,
        "servers": {s: {"requests": len(r), **p50s(r)} for s, r in rows.items()},
    }
    print(
        f"\nthe HTTP part of a c1 request, p50 over all rounds (ms; {cfg.http_rounds} rounds; "
        f"{res['cpus']}):"
    )
    for s, figs in res["servers"].items():
        print(_line(s, figs))
    return res


SETTINGS = (
    "isl",
    "osl",
    "ceiling_step_ms",
    "http_requests",
    "http_rounds",
    "http_servers",
    "http_pin",
)


def _cpus_line(sets: tuple[set[int], set[int]] | None) -> str:
    if sets is None:
        return "not pinned"
    return f"server on CPUs {sorted(sets[0])}, client on {sorted(sets[1])}"


def _line(label: str, figs: dict) -> str:
    cells = " | ".join(
        f"{k.removesuffix('_ms')} {figs[f'{k}_p50']:.3f}"
        if figs[f"{k}_p50"] is not None
        else f"{k} -"
        for k in PARTS
    )
    return f"  {label:>18}: {cells}  ({figs['requests']} requests)"


def write(res: dict, out: str, name: str) -> Path:
    default = f"{dt.datetime.now(dt.UTC).date()}-http.json"
    return results_schema.write_run("http", "c1-synthetic", res, Path(out, name or default))
