"""Warm-up: fixed requests through HTTP, each with its own request id, recorded (never measured)."""

from __future__ import annotations

import json
import time
import uuid

import httpx

from qualflow.phases import PHASE_HEADER, WARMUP

from .outputs import write_warmup

WARMUP_PROMPTS = (
    "Warm-up request: describe the weather in one sentence.",
    "Warm-up request: count from one to ten.",
    "Warm-up request: name three colours.",
    "Warm-up request: write a short greeting.",
)


def run_warmup(
    url: str,
    model: str,
    n: int,
    max_output_tokens: int = 16,
    stream: bool = True,
    timeout_s: float = 600.0,
    request_extensions: bool = True,
    api_key: str | None = None,
) -> list[dict]:
    """`request_extensions`: send qualflow's `ignore_eos` (false: standard Responses fields
    only)."""
    rows = []
    auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(base_url=url, timeout=timeout_s, headers=auth) as client:
        for i in range(n):
            rid = f"warmup-{i:03d}-{uuid.uuid4().hex[:12]}"
            body = {
                "model": model,
                "input": WARMUP_PROMPTS[i % len(WARMUP_PROMPTS)],
                "max_output_tokens": max_output_tokens,
                "stream": stream,
                "store": False,
                **({"ignore_eos": True} if request_extensions else {}),
            }
            headers = {"X-Request-ID": rid, PHASE_HEADER: WARMUP}
            t0 = time.time_ns()
            status, err, echoed, n_events = None, None, None, 0
            try:
                if stream:
                    with client.stream("POST", "/v1/responses", json=body, headers=headers) as r:
                        status, echoed = r.status_code, r.headers.get("x-request-id")
                        for line in r.iter_lines():
                            n_events += line.startswith("event:")
                        if r.status_code != 200:
                            err = f"HTTP {r.status_code}"
                else:
                    r = client.post("/v1/responses", json=body, headers=headers)
                    status, echoed = r.status_code, r.headers.get("x-request-id")
                    if r.status_code != 200:
                        err = f"HTTP {r.status_code}: {r.text[:500]}"
            except httpx.HTTPError as e:
                err = repr(e)
            t1 = time.time_ns()
            rows.append(
                {
                    "request_id": rid,
                    "index": i,
                    "phase": WARMUP,
                    "stream": stream,
                    "http_status": status,
                    "request_id_echoed": echoed == rid,
                    "sse_events": n_events,
                    "client_start_ns": t0,
                    "client_end_ns": t1,
                    "client_latency_ms": (t1 - t0) / 1e6,
                    "error": err,
                }
            )
    return rows


def main_warmup(a) -> int:
    rows = run_warmup(a.url, a.model, a.requests, a.max_output_tokens, stream=not a.no_stream)
    write_warmup(rows, a.out)
    bad = [r for r in rows if r["error"]]
    print(json.dumps({"warmup_requests": len(rows), "failed": len(bad)}))
    return 1 if bad else 0
