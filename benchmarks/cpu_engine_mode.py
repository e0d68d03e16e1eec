"""Which engine mode serves faster on CPU: `qualflow serve --engine-process off` (the engine on a thread)
against `--engine-process on` (its own process), on one bundle, same machine, alternating the modes.
Each run: a fresh server, a warm-up, then C closed-loop streaming clients (httpx, Responses SSE,
ignore_eos, greedy) for DURATION_S seconds; output tok/s counts the delta events that arrived in that
window. Prints each run and the median per mode; writes OUT (JSON).
    python benchmarks/cpu_engine_mode.py BUNDLE OUT.json [--repeats 3] [--duration-s 8] [--concurrency 8]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time

import httpx

from qualflow.session.server_process import free_port


def start(bundle: str, mode: str, extra: list[str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "qualflow.cli", "serve", "--bundle", bundle, "--port", str(port),
                             "--engine-process", mode, "--model-name", "m", "--log-level", "warning", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"server ({mode}) did not become healthy")


async def stream_one(client: httpx.AsyncClient, url: str, body: dict, stop_at: float, counts: list[int]) -> None:
    async with client.stream("POST", url + "/v1/responses", json=body) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {(await r.aread())[:300]!r}")
        async for line in r.aiter_lines():
            if line.startswith("event: response.output_text.delta") and time.monotonic() < stop_at:
                counts[0] += 1


async def load(url: str, concurrency: int, duration_s: float, max_tokens: int) -> float:
    body = {"model": "m", "input": "Tell me a long story about the sea", "stream": True, "temperature": 0,
            "max_output_tokens": max_tokens, "ignore_eos": True}
    counts = [0]
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=concurrency * 2)) as client:
        await asyncio.gather(*(stream_one(client, url, {**body, "max_output_tokens": 4}, 1e18, [0])
                               for _ in range(concurrency)))                       # warm-up
        t0 = time.monotonic()
        stop_at = t0 + duration_s

        async def worker():
            while time.monotonic() < stop_at:
                await stream_one(client, url, body, stop_at, counts)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return counts[0] / duration_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("out")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration-s", type=float, default=8.0)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--serve-flag", action="append", default=[], help="extra `qualflow serve` flag (repeatable)")
    a = ap.parse_args()
    runs: dict[str, list[float]] = {"off": [], "on": []}
    for i in range(a.repeats):
        for mode in ("off", "on") if i % 2 == 0 else ("on", "off"):
            proc, url = start(a.bundle, mode, a.serve_flag)
            try:
                tps = asyncio.run(load(url, a.concurrency, a.duration_s, a.max_tokens))
            finally:
                proc.terminate()
                proc.wait(timeout=60)
            runs[mode].append(tps)
            print(f"run {i} engine-process {mode}: {tps:.0f} tok/s", flush=True)
    res = {"concurrency": a.concurrency, "duration_s": a.duration_s, "max_tokens": a.max_tokens,
           "serve_flags": a.serve_flag, "runs_tok_per_s": runs,
           "median_tok_per_s": {m: statistics.median(v) for m, v in runs.items()}}
    print("median tok/s: thread (off) {off:.0f}, process (on) {on:.0f}".format(**res["median_tok_per_s"]))
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=2)
        fh.write("\n")


if __name__ == "__main__":
    main()
