"""No acknowledged stored response lost to `kill -9` (issue 47's durability target), on SQLite and
PostgreSQL: per round, `qualflow serve --store URL` on the embedded default (CPU) takes CONCURRENCY
clients at once, each sending `store: true` requests one after another (streamed or not; half of
its later turns chained with previous_response_id to its own last one); every response whose
completion the client received (a non-stream 200 body; a stream's response.completed /
response.incomplete event) is acknowledged. Once a seeded random number of them is acknowledged
(1.25 to 2 x CONCURRENCY: second turns, chained ones among them), the server's process group gets
SIGKILL with the rest in flight; a new server on the same store then answers GET for every
acknowledged id (compared whole with what the client got) and its input_items, and continues the
last three.

lost        acknowledged, and GET gives 404 after the restart
mismatched  found, but the stored response, its input items or its previous_response_id differ

  python benchmarks/store_durability.py [--rounds 3] [--concurrency 200] [--seed 0]
        [--pg-url postgresql://USER@HOST/DB | auto] [--backends sqlite,postgresql]
        [--tokens 8] [--max-batch 32] [--json out.json] [--bundle DIR]

`--pg-url auto` starts a throwaway cluster with tests/store/postgres.sh (and stops it at the end).
Exit status 1 when anything acknowledged was lost or differs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from qualflow.session.server_process import free_port

REPO = Path(__file__).resolve().parents[1]
TERMINAL_OK = ("response.completed", "response.incomplete")


def embedded_bundle(work: Path) -> Path:
    """The fp16 bundle of the embedded default checkpoint, built into `work`."""
    from qualflow.artifacts.bundle import build_bundle
    from qualflow.artifacts.pin import pin_checkpoint, write_pin
    from qualflow.families.qwen3.synthetic import write_embedded

    ckpt = write_embedded(work / "checkpoint", "tiny")
    pin = write_pin(pin_checkpoint(str(ckpt)), work / "pin.json")
    build_bundle(pin, "fp16", work / "fp16")
    return work / "fp16"


class Server:
    """`qualflow serve --store URL` in its own process group (SIGKILL reaches all of it)."""

    def __init__(self, bundle: Path, store: str, max_batch: int, log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "qualflow.cli", "serve", "--bundle", str(bundle)]
        cmd += ["--port", str(self.port), "--store", store, "--max-batch", str(max_batch)]
        cmd += ["--cpu-threads", "1", "--max-queue", "4096", "--log-level", "warning"]
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(
            cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def wait_healthy(self, timeout_s: float = 300) -> str:
        """The served model's name, once /health answers."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the server exited with {self.proc.returncode}: {self.log.name}")
            try:
                r = httpx.get(self.url + "/health", timeout=2)
                if r.status_code == 200:
                    return r.json()["model"]
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise SystemExit(f"the server did not become healthy: {self.log.name}")

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=60)
        self.log.close()


@dataclass
class Ack:
    """A response the client received whole: what it sent and what it got."""

    text: str
    previous: str | None
    stream: bool
    response: dict


@dataclass
class Load:
    server: Server
    model: str
    kill_at: int
    tokens: int
    seed: str
    acks: list[Ack] = field(default_factory=list)
    in_flight: int = 0
    in_flight_at_kill: int | None = None
    killed_after_s: float | None = None
    refused: int = 0
    t0: float = field(default_factory=time.monotonic)


async def send(client: httpx.AsyncClient, load: Load, body: dict) -> dict | None:
    """The response the client was told completed, or None (refused, failed, cut off)."""
    url = load.server.url + "/v1/responses"
    if not body["stream"]:
        r = await client.post(url, json=body)
        if r.status_code != 200:
            load.refused += 1
            return None
        return r.json()
    async with client.stream("POST", url, json=body) as r:
        if r.status_code != 200:
            load.refused += 1
            return None
        async for line in r.aiter_lines():
            if line.startswith("data:"):
                event = json.loads(line[5:])
                if event.get("type") in TERMINAL_OK:
                    return event["response"]
    return None


async def client_loop(client: httpx.AsyncClient, load: Load, w: int) -> None:
    rng = random.Random(f"{load.seed}-{w}")
    previous, n = None, 0
    while load.in_flight_at_kill is None:
        text = f"client {w} turn {n}: tell me something {rng.randint(0, 10**6)}"
        chained = previous is not None and rng.random() < 0.5
        body = {"model": load.model, "input": text, "store": True, "stream": rng.random() < 0.5}
        body.update(max_output_tokens=load.tokens)
        if chained:
            body["previous_response_id"] = previous
        load.in_flight += 1
        try:
            got = await send(client, load, body)
        except (httpx.HTTPError, json.JSONDecodeError):
            got = None  # cut off by the kill
        finally:
            load.in_flight -= 1
        if got is None:
            if load.in_flight_at_kill is None:
                await asyncio.sleep(0.05)
            continue
        load.acks.append(Ack(text, body.get("previous_response_id"), body["stream"], got))
        previous, n = got["id"], n + 1
        if len(load.acks) >= load.kill_at and load.in_flight_at_kill is None:
            load.server.kill9()  # synchronous: no other client runs between the count and the kill
            load.in_flight_at_kill = load.in_flight
            load.killed_after_s = time.monotonic() - load.t0


async def run_load(load: Load, concurrency: int) -> None:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600, connect=30), limits=limits) as client:
        await asyncio.gather(*(client_loop(client, load, w) for w in range(concurrency)))


async def verify(url: str, model: str, acks: list[Ack], tokens: int) -> dict:
    """Lost and mismatched acknowledged responses on the restarted server; a few continued."""
    lost, mismatched, sem = [], [], asyncio.Semaphore(16)

    async def check(client: httpx.AsyncClient, a: Ack) -> None:
        rid = a.response["id"]
        async with sem:
            r = await client.get(f"{url}/v1/responses/{rid}")
            if r.status_code == 404:
                lost.append(rid)
                return
            items = await client.get(f"{url}/v1/responses/{rid}/input_items?order=asc")
        stored, data = r.json(), items.json().get("data", [])
        texts = [p.get("text") for i in data for p in i.get("content", [])]
        if (
            stored != a.response
            or texts != [a.text]
            or stored["previous_response_id"] != a.previous
        ):
            mismatched.append(rid)

    async with httpx.AsyncClient(timeout=120) as client:
        await asyncio.gather(*(check(client, a) for a in acks))
        continued = 0
        for a in acks[-3:]:
            body = {"model": model, "input": "and then?", "max_output_tokens": tokens}
            body["previous_response_id"] = a.response["id"]
            r = await client.post(f"{url}/v1/responses", json=body)
            continued += r.status_code == 200
    return {"lost": lost, "mismatched": mismatched, "continued": continued}


def one_round(a, bundle: Path, backend: str, store: str, rnd: int, work: Path) -> dict:
    seed = f"{a.seed}-{backend}-{rnd}"
    kill_at = random.Random(seed).randint(a.concurrency * 5 // 4, 2 * a.concurrency)
    log = work / f"{backend}-{rnd}.log"
    server = Server(bundle, store, a.max_batch, log)
    try:
        load = Load(server, server.wait_healthy(), kill_at, a.tokens, seed)
        asyncio.run(run_load(load, a.concurrency))
    finally:
        server.stop(signal.SIGKILL)
    again = Server(bundle, store, a.max_batch, log)
    try:
        again.wait_healthy()
        checked = asyncio.run(verify(again.url, load.model, load.acks, a.tokens))
    finally:
        again.stop()
    return {
        "backend": backend,
        "round": rnd,
        "seed": seed,
        "acknowledged": len(load.acks),
        "streamed": sum(x.stream for x in load.acks),
        "chained": sum(x.previous is not None for x in load.acks),
        "in_flight_at_kill": load.in_flight_at_kill,
        "killed_after_s": round(load.killed_after_s or 0.0, 2),
        "refused": load.refused,
        "lost": len(checked["lost"]),
        "mismatched": len(checked["mismatched"]),
        "continued_after_restart": checked["continued"],
        "lost_ids": checked["lost"],
        "mismatched_ids": checked["mismatched"],
    }


def postgres(url: str):
    """(URL, stop) of the PostgreSQL to use: `auto` starts a throwaway cluster (in a folder of its
    own under /tmp: as root, the script hands it to the postgres user)."""
    if url != "auto":
        return url, lambda: None
    folder = tempfile.mkdtemp(prefix="qualflow-pg-")
    env = {**os.environ, "QUALFLOW_PG_DIR": folder, "QUALFLOW_PG_PORT": str(free_port())}
    script = [str(REPO / "tests" / "store" / "postgres.sh")]
    r = subprocess.run(["bash", *script, "start"], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"tests/store/postgres.sh start failed: {r.stderr.strip()}")
    stop = lambda: subprocess.run(["bash", *script, "stop"], capture_output=True, env=env)  # noqa: E731
    return r.stdout.strip().splitlines()[-1], stop


def table(rows: list[dict]) -> str:
    cols = ["backend", "round", "acknowledged", "in_flight_at_kill", "lost", "mismatched"]
    cols += ["streamed", "chained", "continued_after_restart"]
    lines = ["  ".join(f"{c:>{max(len(c), 10)}}" for c in cols)]
    for r in rows:
        lines.append("  ".join(f"{r[c]!s:>{max(len(c), 10)}}" for c in cols))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="kill/restart rounds per backend")
    ap.add_argument("--concurrency", type=int, default=200, help="requests in flight")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=8, help="max_output_tokens of each request")
    ap.add_argument("--max-batch", type=int, default=32, help="the server's running batch")
    ap.add_argument("--backends", default=None, help="default: sqlite (+ postgresql with a URL)")
    ap.add_argument("--pg-url", default=None, help="postgresql://… or auto (a throwaway cluster)")
    ap.add_argument("--json", type=Path, default=None, help="write the rounds here")
    ap.add_argument("--bundle", type=Path, help="default: the embedded default, built now")
    a = ap.parse_args()
    backends = (a.backends or "sqlite" + (",postgresql" if a.pg_url else "")).split(",")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the servers and cluster stopped
    rows = []
    with tempfile.TemporaryDirectory(prefix="store-durability-") as tmp:
        work = Path(tmp)
        bundle = a.bundle or embedded_bundle(work)
        pg_url, pg_stop = postgres(a.pg_url) if "postgresql" in backends else (None, None)
        try:
            for backend in backends:
                store = pg_url if backend == "postgresql" else str(work / "store.db")
                for rnd in range(a.rounds):
                    rows.append(one_round(a, bundle, backend, store, rnd, work))
                    print(table(rows[-1:]).splitlines()[-1], flush=True)
        finally:
            if pg_stop is not None:
                pg_stop()
    print(table(rows))
    for b in backends:
        mine = [r for r in rows if r["backend"] == b]
        print(
            f"{b}: {sum(r['acknowledged'] for r in mine)} acknowledged over {len(mine)} rounds, "
            f"{sum(r['in_flight_at_kill'] or 0 for r in mine)} in flight at the kills, "
            f"{sum(r['lost'] for r in mine)} lost, {sum(r['mismatched'] for r in mine)} mismatched"
        )
    if a.json:
        a.json.write_text(json.dumps({"args": vars(a), "rounds": rows}, default=str, indent=1))
    sys.exit(1 if any(r["lost"] or r["mismatched"] for r in rows) else 0)


if __name__ == "__main__":
    main()
