"""Constrained outputs that fail their schema, on the embedded default (CPU) over real uvicorn: a
`qualflow serve` subprocess takes N requests with `tool_choice: required` and a `strict: true`
function, and N requests with `text.format` `{type: json_schema, strict: true}`, CONCURRENCY at a
time, with varied prompts and sampling temperatures (the constraint, not greedy decoding, is what
keeps them valid). Every call's arguments and every output text is checked against its schema with
`jsonschema`. Prints, per kind: requests, failures (no call, invalid JSON, schema violations, HTTP
errors), incomplete responses and the p50 latency; `--out` writes the same as JSON. The target
(issue 46): 0 failures in 1,000 of each kind.

  python benchmarks/schema_failures.py [--requests 1000] [--concurrency 8] [--tokens 160]
                                       [--out FILE] [--bundle DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import jsonschema

from qualflow.session.server_process import OwnedServer, free_port

# The typed fields a strict schema can hold: a string enum, a bounded integer, a nested object and
# an array (strict: every property required, no other property allowed).
SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["city", "unit", "days", "place", "tags"],
    "properties": {
        "city": {"type": "string", "maxLength": 24},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit", "kelvin"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "place": {
            "type": "object",
            "additionalProperties": False,
            "required": ["country", "zip"],
            "properties": {
                "country": {"type": "string", "enum": ["FR", "NO", "PE", "JP"]},
                "zip": {"type": "integer", "minimum": 0, "maximum": 99999},
            },
        },
        "tags": {
            "type": "array",
            "maxItems": 3,
            "items": {"type": "string", "maxLength": 10},
        },
    },
}
TOOL = {
    "type": "function",
    "name": "get_forecast",
    "description": "The weather forecast for a place.",
    "strict": True,
    "parameters": SCHEMA,
}
FORMAT = {"type": "json_schema", "name": "forecast", "strict": True, "schema": SCHEMA}
PROMPTS = (
    "What will the weather be in {c} over the next {d} days?",
    "Forecast for {c}, please, {d} days ahead.",
    "Is it going to rain in {c}? Plan for {d} days.",
    "I travel to {c} for {d} days: what should I pack?",
    "Temperature in {c} for the coming {d} days, in kelvin.",
)
CITIES = ("Paris", "Oslo", "Lima", "Kyoto", "Nairobi", "Quito", "Perth", "Tromsø")
TEMPERATURES = (0.0, 0.6, 1.0, 1.3)
TOP_P = (1.0, 0.9, 1.0)  # three against four temperatures: every pairing comes up


@dataclass
class Tally:
    requests: int = 0
    no_call: int = 0
    invalid_json: int = 0
    schema_violations: int = 0
    http_errors: int = 0
    incomplete: int = 0
    output_tokens: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)  # the first few failures, for the reader

    @property
    def failures(self) -> int:
        return self.no_call + self.invalid_json + self.schema_violations + self.http_errors

    def fail(self, kind: str, detail: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.examples) < 5:
            self.examples.append(f"{kind}: {detail[:300]}")


def body(kind: str, i: int, tokens: int) -> dict:
    prompt = PROMPTS[i % len(PROMPTS)].format(c=CITIES[i % len(CITIES)], d=1 + i % 14)
    b = {
        "model": "m",
        "input": prompt,
        "max_output_tokens": tokens,
        "temperature": TEMPERATURES[i % len(TEMPERATURES)],
        "top_p": TOP_P[i % len(TOP_P)],
    }
    if kind == "calls":
        b.update(tools=[TOOL], tool_choice="required")
    else:
        b["text"] = {"format": FORMAT}
    return b


def texts_of(kind: str, resp: dict) -> list[str] | None:
    """The JSON texts to validate: each call's arguments, or the output text; None: no call."""
    if kind == "calls":
        args = [i["arguments"] for i in resp["output"] if i["type"] == "function_call"]
        return args or None
    return [
        part["text"]
        for item in resp["output"]
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    ]


def check(kind: str, resp: dict, tally: Tally) -> None:
    if resp.get("status") == "incomplete":
        tally.incomplete += 1
        return
    texts = texts_of(kind, resp)
    if texts is None:
        tally.fail("no_call", json.dumps(resp["output"]))
        return
    for text in texts:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            tally.fail("invalid_json", f"{e}: {text}")
            continue
        try:
            jsonschema.validate(value, SCHEMA)
        except jsonschema.ValidationError as e:
            tally.fail("schema_violations", f"{e.message}: {text}")


async def run_kind(url: str, kind: str, n: int, concurrency: int, tokens: int) -> Tally:
    tally, sem = Tally(), asyncio.Semaphore(concurrency)

    async def one(client: httpx.AsyncClient, i: int) -> None:
        async with sem:
            t0 = time.perf_counter()
            try:
                r = await client.post(url + "/v1/responses", json=body(kind, i, tokens))
            except httpx.HTTPError as e:
                tally.fail("http_errors", f"{type(e).__name__}: {e}")
                return
            tally.latencies_ms.append((time.perf_counter() - t0) * 1e3)
            tally.requests += 1
            if r.status_code != 200:
                tally.fail("http_errors", f"{r.status_code}: {r.text}")
                return
            resp = r.json()
            tally.output_tokens += resp["usage"]["output_tokens"]
            check(kind, resp, tally)
            if tally.requests % 100 == 0:
                print(f"{kind}: {tally.requests}/{n}, {tally.failures} failures", file=sys.stderr)

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        await asyncio.gather(*(one(client, i) for i in range(n)))
    return tally


def embedded_bundle(work: Path) -> Path:
    """The fp16 bundle of the embedded default checkpoint, built into `work`."""
    from qualflow.artifacts.bundle import build_bundle
    from qualflow.artifacts.pin import pin_checkpoint, write_pin
    from qualflow.families.qwen3.synthetic import write_embedded

    ckpt = write_embedded(work / "checkpoint", "tiny")
    pin = write_pin(pin_checkpoint(str(ckpt)), work / "pin.json")
    build_bundle(pin, "fp16", work / "fp16")
    return work / "fp16"


def summary(kind: str, t: Tally) -> dict:
    p50 = statistics.median(t.latencies_ms) if t.latencies_ms else float("nan")
    out = {k: v for k, v in asdict(t).items() if k != "latencies_ms"}
    mean_tokens = t.output_tokens / max(1, t.requests)
    return {
        "kind": kind,
        **out,
        "failures": t.failures,
        "p50_ms": round(p50, 1),
        "mean_output_tokens": round(mean_tokens, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1000, help="requests of each kind")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=160, help="max_output_tokens of each request")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    ap.add_argument("--bundle", type=Path, help="default: the embedded default, built now")
    ap.add_argument("--device", default="cpu", help="the server's torch device: cpu or cuda")
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        bundle = a.bundle or embedded_bundle(Path(tmp))
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "qualflow.cli", "serve", "--bundle", str(bundle)]
        cmd += ["--port", str(port), "--max-batch", str(a.concurrency), "--model-name", "m"]
        cmd += ["--cpu-threads", "1", "--device", a.device]
        server = OwnedServer(cmd, host="127.0.0.1", port=port, log_path=Path(tmp, "server.log"))
        server.start()
        try:
            server.wait_healthy(300)
            rows = [
                summary(kind, asyncio.run(run_kind(url, kind, a.requests, a.concurrency, a.tokens)))
                for kind in ("calls", "json_schema")
            ]
        finally:
            server.stop()
    print(
        f"{'kind':<13}{'requests':>9}{'failures':>9}{'no call':>8}{'bad JSON':>9}"
        f"{'schema':>8}{'HTTP':>6}{'incomplete':>11}{'p50 ms':>9}{'tokens':>8}"
    )
    for r in rows:
        print(
            f"{r['kind']:<13}{r['requests']:>9}{r['failures']:>9}{r['no_call']:>8}"
            f"{r['invalid_json']:>9}{r['schema_violations']:>8}{r['http_errors']:>6}"
            f"{r['incomplete']:>11}{r['p50_ms']:>9.1f}{r['mean_output_tokens']:>8.1f}"
        )
        for ex in r["examples"]:
            print(f"  {ex}")
    if a.out is not None:
        meta = {"concurrency": a.concurrency, "max_output_tokens": a.tokens}
        a.out.write_text(json.dumps({"settings": meta, "kinds": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
