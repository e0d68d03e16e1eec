"""The API process's own cost per engine step, on CPU: `qualflow serve --engine synthetic` (no model, one
token per running request every STEP_MS) driven by C closed-loop streaming clients. Each run starts a
fresh server from one source tree (--src NAME=DIR, e.g. before=<a checkout>/src after=src; runs of the
trees alternate), warms it up, then measures for DURATION_S seconds:

  tok/s        tokens delivered in delta events (a merged delta counts each of its tokens), over the window,
               and the median of its one-second windows;
  cpu_us/tok   the server process's CPU time (utime + stime) over the window per token delivered: what one
               token costs the API process, which a loaded machine changes far less than tok/s (and per
               delta event: a client that falls behind gets merged deltas, which cost less per token);
  tok/delta    tokens per delta event: 1.0 while each delta leaves in the step that produced it;
  ITL p50/p99  client-side gaps between a stream's deltas.

The client is a raw asyncio HTTP/1.1 client (no SDK), so that it costs as little CPU as it can.
    python benchmarks/api_step_cost.py BUNDLE OUT.json --src before=/path/src --src after=src \
        [--concurrency 64] [--step-ms 1] [--duration-s 6] [--repeats 3] [--max-tokens 128] [--profile PREFIX]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

from qualflow.session.server_process import free_port

TICK = os.sysconf("SC_CLK_TCK")
DELTA = b'data: {"type":"response.output_text.delta"'


def start(bundle: str, src: str, concurrency: int, step_ms: float, profile: str | None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    if profile:   # benchmarks/profiling's sampling profiler, into PROFILE
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiling")
        env.update(PYTHONPATH=f"{here}:{env['PYTHONPATH']}", QUALFLOW_SAMPLE_PROFILE=profile)
    proc = subprocess.Popen([sys.executable, "-m", "qualflow.cli", "serve", "--bundle", bundle, "--port", str(port),
                             "--engine", "synthetic", "--step-ms", str(step_ms), "--max-batch", str(concurrency),
                             "--model-name", "m", "--log-level", "warning", "--max-context", "1024"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            asyncio.run(_get(port, "/health"))
            return proc, port
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("server did not become healthy")


async def _get(port: int, path: str) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    head = await r.read()
    w.close()
    if b" 200 " not in head.split(b"\r\n", 1)[0]:
        raise OSError("not ready")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Meter:
    def __init__(self):
        self.tokens, self.deltas, self.gaps, self.window = 0, 0, [], None
        self.seconds: dict[int, int] = {}

    def delta(self, line: bytes, now: float, last: float | None) -> float:
        if self.window is not None and self.window[0] <= now < self.window[1]:
            n = line.count(b" token")
            self.tokens += n
            self.deltas += 1
            sec = int(now - self.window[0])
            self.seconds[sec] = self.seconds.get(sec, 0) + n
            if last is not None:
                self.gaps.append(now - last)
        return now


async def stream_one(port: int, body: bytes, meter: Meter) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    buf, last = b"", None
    while chunk := await r.read(65536):
        buf += chunk
        *lines, buf = buf.split(b"\n")
        now = time.monotonic()
        for ln in lines:
            if ln.startswith(DELTA):
                last = meter.delta(ln, now, last)
    w.close()


async def load(port: int, concurrency: int, duration_s: float, max_tokens: int, pid: int) -> dict:
    body = json.dumps({"model": "m", "input": "Tell me a long story about the sea", "stream": True,
                       "max_output_tokens": max_tokens}).encode()
    meter = Meter()
    warm = json.dumps({"model": "m", "input": "hi", "stream": True, "max_output_tokens": 4}).encode()
    await asyncio.gather(*(stream_one(port, warm, Meter()) for _ in range(concurrency)))
    stop = [False]

    async def worker():
        while not stop[0]:
            await stream_one(port, body, meter)

    tasks = [asyncio.ensure_future(worker()) for _ in range(concurrency)]
    await asyncio.sleep(1.0)   # every stream running before the window opens
    t0 = time.monotonic()
    meter.window, c0 = (t0, t0 + duration_s), cpu_s(pid)
    await asyncio.sleep(duration_s)
    c1 = cpu_s(pid)
    stop[0] = True
    await asyncio.gather(*tasks)
    gaps = sorted(meter.gaps)
    per_s = [meter.seconds.get(i, 0) for i in range(int(duration_s))]
    return {"tok_per_s": meter.tokens / duration_s, "tok_per_s_median_1s": statistics.median(per_s),
            "cpu_us_per_tok": 1e6 * (c1 - c0) / max(meter.tokens, 1),
            "cpu_us_per_delta": 1e6 * (c1 - c0) / max(meter.deltas, 1),
            "server_cpu_share": (c1 - c0) / duration_s,
            "tok_per_delta": meter.tokens / max(meter.deltas, 1),
            "itl_ms_p50": 1e3 * gaps[len(gaps) // 2] if gaps else None,
            "itl_ms_p99": 1e3 * gaps[int(len(gaps) * 0.99)] if gaps else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("out")
    ap.add_argument("--src", action="append", required=True, help="NAME=DIR: a source tree to serve from")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration-s", type=float, default=6.0)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--step-ms", type=float, default=1.0)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--profile", help="PREFIX: each server under the sampling profiler, into PREFIX.<tree>.<run>.txt")
    a = ap.parse_args()
    trees = dict(s.split("=", 1) for s in a.src)
    runs: dict[str, list[dict]] = {n: [] for n in trees}
    for i in range(a.repeats):
        for name in (list(trees) if i % 2 == 0 else list(trees)[::-1]):
            prof = f"{a.profile}.{name}.{i}.txt" if a.profile else None
            proc, port = start(a.bundle, trees[name], a.concurrency, a.step_ms, prof)
            try:
                r = asyncio.run(load(port, a.concurrency, a.duration_s, a.max_tokens, proc.pid))
            finally:
                proc.terminate()
                proc.wait(timeout=60)
            runs[name].append(r)
            print(f"run {i} {name}: {r['tok_per_s']:.0f} tok/s (1 s median {r['tok_per_s_median_1s']:.0f}), "
                  f"{r['cpu_us_per_tok']:.1f} cpu us/tok, {r['cpu_us_per_delta']:.1f} cpu us/delta, "
                  f"server cpu {r['server_cpu_share']:.2f}, "
                  f"{r['tok_per_delta']:.2f} tok/delta, ITL p50 {r['itl_ms_p50']:.2f} ms", flush=True)
    med = {n: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for n, rs in runs.items()}
    for n, m in med.items():
        print(f"median {n}: {m['tok_per_s']:.0f} tok/s, {m['cpu_us_per_tok']:.1f} cpu us/tok, "
              f"{m['tok_per_delta']:.2f} tok/delta, ITL p50 {m['itl_ms_p50']:.2f} ms")
    res = {"concurrency": a.concurrency, "step_ms": a.step_ms, "duration_s": a.duration_s, "max_tokens": a.max_tokens,
           "trees": trees, "runs": runs, "median": med}
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=2)
        fh.write("\n")


if __name__ == "__main__":
    main()
