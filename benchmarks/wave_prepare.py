"""How long a request's way in (HTTP arrival -> Task submit) takes on the API process's event loop, for
the pilot's shape: one wave of C (64) concurrent streamed Responses requests of ~ISL (1024) prompt tokens,
OSL output tokens, against a real `qualflow serve --engine synthetic` (no model: the real tokenizer, chat
template, HTTP path and timing records) on the embedded default's bundle. Also the c1 case (sequential).

Per wave, from the server's own timing records (X-Request-ID joins them to the client's):
  arrival->submit   submitted_ns - http_received_ns of each request (p50, max)
  submit spread     last submit - first submit across the wave (the loop's serial work, ~C x per-request)
  send->last submit the client's first send to the wave's last submit
  loop CPU          the server main thread's (event loop's) CPU time over the wave, per request
and the client's TTFT (p50). Each figure is the median over the waves, each of fresh prompts, after a
first wave on the cold server (reported apart; it also opens the keep-alive connections). `--spy OUT` records the server with py-spy during the waves.

  .venv/bin/python benchmarks/wave_prepare.py [--waves 7] [--json out.json] [--spy spy.txt]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

from qualflow.session.server_process import OwnedServer, free_port

WORDS = ("the of and to in is was that for on with as by at from his her an which or were are be this had "
         "not but have they one all their has been would there who more when will if no out so said what up "
         "its about into than them can only other new some could time these two may then do first any my now "
         "such like our over man me even most made after also did many before must through back years where "
         "much your way well down should because each just those people how too little state good very make "
         "world still own see men work long get here between both life being under never day same another "
         "know while last might us great old year off come since against go came right used take three").split()


def bundle(work: Path) -> Path:
    """The embedded default (tiny preset: the real Qwen3 tokenizer and template), built once under `work`."""
    out = work / "bundle-tiny"
    if not (out / "manifest.json").exists():
        from qualflow.artifacts.bundle import build_bundle
        from qualflow.artifacts.pin import pin_checkpoint, write_pin
        from qualflow.families.qwen3.synthetic import write_embedded
        ckpt = write_embedded(work / "ckpt-tiny", "tiny")
        pin = write_pin(pin_checkpoint(str(ckpt)), work / "pin-tiny.json")
        build_bundle(pin, "fp16", out)
    return out


def corpus() -> str:
    """AIPerf's own prompt corpus (what the pilot's synthetic prompts are cut from), else a word list."""
    try:
        from importlib import resources
        return resources.files("aiperf.dataset.generator").joinpath("assets/shakespeare.txt").read_text()
    except (ImportError, FileNotFoundError):
        rng = random.Random(0)
        return " ".join(rng.choice(WORDS) for _ in range(200_000))


def prompts(bundle_dir: Path, n: int, isl: int, seed: int = 0) -> list[str]:
    """`n` distinct texts of about `isl` tokens of the bundle's tokenizer: random windows of the corpus."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(bundle_dir / "tokenizer.json"))
    text = corpus()
    rng, out, span = random.Random(seed), [], isl * 8
    for _ in range(n):
        at = rng.randrange(0, len(text) - span)
        ids = tok.encode(text[at:at + span], add_special_tokens=False).ids[1:isl - 11]   # room for the template
        out.append(tok.decode(ids))
    return out


def server(bundle_dir: Path, work: Path, args) -> OwnedServer:
    """`qualflow serve --engine synthetic` on the bundle, at the wave's batch and context."""
    port = free_port()
    cmd = [sys.executable, "-m", "qualflow.cli", "serve", "--bundle", str(bundle_dir), "--port", str(port),
           "--engine", "synthetic", "--step-ms", str(args.step_ms), "--max-batch", str(args.concurrency),
           "--max-context", str(args.isl + args.osl + 64), "--timing-log", str(work / "timing.jsonl"),
           "--log-level", "warning", "--model-name", "wave", "--cpu-threads", "1", "--max-queue", "512"]
    return OwnedServer(cmd, host="127.0.0.1", port=port, log_path=work / "server.log")


async def one(s: aiohttp.ClientSession, url: str, rid: str, text: str, osl: int) -> dict:
    body = {"model": "wave", "input": [{"role": "user", "content": text}], "stream": True,
            "max_output_tokens": osl, "ignore_eos": True, "min_tokens": osl, "temperature": 0, "store": False}
    sent = time.time_ns()
    first = None
    async with s.post(url + "/v1/responses", json=body, headers={"x-request-id": rid}) as r:
        r.raise_for_status()
        async for chunk in r.content.iter_any():
            if first is None and b"output_text.delta" in chunk:
                first = time.time_ns()
    return {"rid": rid, "sent_ns": sent, "first_ns": first}


async def records(s: aiohttp.ClientSession, url: str, rids: list[str]) -> dict[str, dict]:
    for _ in range(100):
        async with s.get(url + "/v1/qualflow/task-timings", params={"request_ids": ",".join(rids)}) as r:
            data = (await r.json())["data"]
        if len(data) == len(rids) and all(d["http_sent_ns"] for d in data):
            return {d["request_id"]: d for d in data}
        await asyncio.sleep(0.05)
    raise RuntimeError("timing records did not become final")


def wave_figures(client: list[dict], recs: dict[str, dict]) -> dict:
    ms = 1e6
    a2s = sorted((recs[c["rid"]]["submitted_ns"] - recs[c["rid"]]["http_received_ns"]) / ms for c in client)
    subs = [recs[c["rid"]]["submitted_ns"] for c in client]
    ttft = sorted((c["first_ns"] - c["sent_ns"]) / ms for c in client)
    return {"arrival_submit_p50_ms": statistics.median(a2s), "arrival_submit_max_ms": a2s[-1],
            "submit_spread_ms": (max(subs) - min(subs)) / ms,
            "send_last_submit_ms": (max(subs) - min(c["sent_ns"] for c in client)) / ms,
            "ttft_p50_ms": statistics.median(ttft)}


def loop_cpu_ns(pid: int) -> int:
    """CPU time the server's main thread (its event loop) has run, in ns (Linux schedstat)."""
    return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[0])


async def run_wave(s, url: str, tag: str, texts: list[str], osl: int, pid: int) -> dict:
    rids = [f"{tag}-{i}" for i in range(len(texts))]
    cpu0 = loop_cpu_ns(pid)
    client = await asyncio.gather(*(one(s, url, r, t, osl) for r, t in zip(rids, texts)))
    cpu = loop_cpu_ns(pid) - cpu0
    return {**wave_figures(client, await records(s, url, rids)), "loop_cpu_per_request_ms": cpu / 1e6 / len(texts)}


async def run_sequential(s, url: str, tag: str, texts: list[str], osl: int, pid: int) -> dict:
    out = []
    for i, t in enumerate(texts):
        rid = f"{tag}-{i}"
        cpu0 = loop_cpu_ns(pid)
        c = await one(s, url, rid, t, osl)
        cpu = loop_cpu_ns(pid) - cpu0
        r = (await records(s, url, [rid]))[rid]
        out.append({"loop_cpu_ms": cpu / 1e6, "arrival_submit_ms": (r["submitted_ns"] - r["http_received_ns"]) / 1e6,
                    "send_submit_ms": (r["submitted_ns"] - c["sent_ns"]) / 1e6,
                    "ttft_ms": (c["first_ns"] - c["sent_ns"]) / 1e6})
    return {k: statistics.median(o[k] for o in out) for k in out[0]}


def median_of(waves: list[dict]) -> dict:
    return {k: round(statistics.median(w[k] for w in waves), 2) for k in waves[0]}


async def measure(url: str, texts: list[str], args, spy, pid: int) -> dict:
    c = args.concurrency
    conn = aiohttp.TCPConnector(limit=c, force_close=False)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=600)) as s:
        first = await run_wave(s, url, "first", texts[:c], args.osl, pid)   # cold server; opens the connections
        seq = await run_sequential(s, url, "c1", texts[:args.c1_requests], min(args.osl, 16), pid)
        if spy is not None:
            spy.start()
        waves = []
        for w in range(args.waves):
            await asyncio.sleep(0.3)
            waves.append(await run_wave(s, url, f"w{w}", texts[(w + 1) * c % len(texts):][:c] or texts[:c],
                                        args.osl, pid))
        seq_after = await run_sequential(s, url, "c1b", texts[:args.c1_requests], min(args.osl, 16), pid)
    c1 = {k: round(statistics.median([seq[k], seq_after[k]]), 3) for k in seq}
    return {"wave": median_of(waves), "waves": waves, "first_wave": median_of([first]), "c1": c1}


class Spy:
    def __init__(self, pid: int, out: str, seconds: float, native: bool = False):
        self.pid, self.out, self.seconds, self.native, self.proc = pid, out, seconds, native, None

    def start(self) -> None:
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.proc = subprocess.Popen([spy, "record", "--pid", str(self.pid), "--rate", "500", "--format",
                                      "raw", "--duration", str(int(self.seconds)), "--output", self.out]
                                     + (["--native"] if self.native else []),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait(self) -> None:
        if self.proc is not None:
            self.proc.wait()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="/tmp/qualflow-wave")
    p.add_argument("--waves", type=int, default=7)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--isl", type=int, default=1024)
    p.add_argument("--osl", type=int, default=256)
    p.add_argument("--step-ms", type=float, default=5.0)
    p.add_argument("--c1-requests", type=int, default=10)
    p.add_argument("--json", help="write the figures here too")
    p.add_argument("--spy", help="py-spy raw (collapsed) stacks of the server during the waves")
    p.add_argument("--spy-native", action="store_true", help="py-spy with native frames (C extensions)")
    args = p.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    b = bundle(work)
    texts = prompts(b, args.concurrency * (args.waves + 1), args.isl)
    srv = server(b, work, args)
    srv.start()
    try:
        srv.wait_healthy(120)
        pid = srv.proc.pid
        spy = Spy(pid, args.spy, args.waves * 2.0, args.spy_native) if args.spy else None
        res = asyncio.run(measure(srv.url, texts, args, spy, pid))
        if spy is not None:
            spy.wait()
    finally:
        srv.stop()
    res["settings"] = {k: getattr(args, k) for k in ("concurrency", "isl", "osl", "step_ms", "waves")}
    res["prompt_chars_p50"] = statistics.median(len(t) for t in texts)
    print(f"wave c{args.concurrency} ISL~{args.isl} OSL {args.osl}, median of {args.waves} waves: "
          + ", ".join(f"{k} {v}" for k, v in res["wave"].items()))
    print("first wave (cold server): " + ", ".join(f"{k} {v}" for k, v in res["first_wave"].items()))
    print("c1 (median of requests): " + ", ".join(f"{k} {v}" for k, v in res["c1"].items()))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
