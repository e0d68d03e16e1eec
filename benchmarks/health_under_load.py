"""GET /health's latency while the server is overloaded: a `qualflow serve --max-batch 4` on the
embedded default (CPU; `--engine synthetic` for the serving path alone) takes REQUESTS concurrent
streamed requests at once (a separate process sends them), and this process asks /health every
PROBE_MS meanwhile, over its own keep-alive connection. Prints the probes' p50/p99/max and what the
load's requests got (200s, 429s). The target (issue 50): p99 <= 100 ms.

  python benchmarks/health_under_load.py [--requests 400] [--max-batch 4] [--tokens 32]
                                         [--engine model|synthetic] [--bundle DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from qualflow.session.server_process import OwnedServer, free_port

PROBE_MS = 20


def embedded_bundle(work: Path) -> Path:
    """The fp16 bundle of the embedded default checkpoint, built into `work`."""
    from qualflow.artifacts.bundle import build_bundle
    from qualflow.artifacts.pin import pin_checkpoint, write_pin
    from qualflow.families.qwen3.synthetic import write_embedded

    ckpt = write_embedded(work / "checkpoint", "tiny")
    pin = write_pin(pin_checkpoint(str(ckpt)), work / "pin.json")
    build_bundle(pin, "fp16", work / "fp16")
    return work / "fp16"


def load(url: str, n: int, tokens: int, out) -> None:
    """Send `n` streamed requests at once; put the status code counts on `out`."""

    async def one(client: httpx.AsyncClient, i: int) -> int:
        body = {"model": "m", "input": f"Tell me a story, number {i}.", "stream": True}
        body.update(max_output_tokens=tokens, ignore_eos=True)
        try:
            async with client.stream("POST", url + "/v1/responses", json=body) as r:
                async for _ in r.aiter_bytes():
                    pass
                return r.status_code
        except httpx.HTTPError as e:
            return type(e).__name__

    async def main() -> collections.Counter:
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        async with httpx.AsyncClient(timeout=600, limits=limits) as client:
            return collections.Counter(await asyncio.gather(*(one(client, i) for i in range(n))))

    out.put(dict(asyncio.run(main())))


def probe(url: str, sender: multiprocessing.Process) -> list[float]:
    """/health latencies (ms), one every PROBE_MS while `sender` runs."""
    out = []
    with httpx.Client(timeout=30) as client:
        while sender.is_alive():
            t0 = time.perf_counter()
            assert client.get(url + "/health").status_code == 200
            out.append((time.perf_counter() - t0) * 1e3)
            time.sleep(max(0.0, PROBE_MS / 1e3 - (time.perf_counter() - t0)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--max-batch", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=32, help="max_output_tokens of each request")
    ap.add_argument("--engine", choices=["model", "synthetic"], default="model")
    ap.add_argument("--bundle", type=Path, help="default: the embedded default, built now")
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        bundle = a.bundle or embedded_bundle(Path(tmp))
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "qualflow.cli", "serve", "--bundle", str(bundle)]
        cmd += ["--port", str(port), "--max-batch", str(a.max_batch), "--model-name", "m"]
        cmd += ["--engine", a.engine, "--cpu-threads", "1"]
        server = OwnedServer(cmd, host="127.0.0.1", port=port, log_path=Path(tmp, "server.log"))
        server.start()
        try:
            server.wait_healthy(300)
            results = multiprocessing.Queue()
            sender = multiprocessing.Process(target=load, args=(url, a.requests, a.tokens, results))
            sender.start()
            lat = probe(url, sender)
            sender.join()
            codes = results.get(timeout=10)
        finally:
            server.stop()
    q = statistics.quantiles(lat, n=100)
    print(
        f"/health under {a.requests} concurrent requests, max-batch {a.max_batch}, "
        f"engine {a.engine}: {len(lat)} probes, p50 {q[49]:.1f} ms, p99 {q[98]:.1f} ms, "
        f"max {max(lat):.1f} ms; the load's answers: {codes}"
    )


if __name__ == "__main__":
    main()
