"""The response store's speed and size on CPU (SQLite by default, or any store URL):

write p50/p99   one put: a response (its JSON ~1 KB) with one input message and two output items
                (reasoning, message), committed (SQLite: WAL, synchronous=FULL);
write, N writers  the same puts from N threads at once (the server's concurrent requests), with
                the puts per second;
chain p50/p99   loading the context of a 10-turn previous_response_id chain (every item, in order);
size            the database's size on disk (main file + WAL) after N stored responses, retention
                keeping at most BOUND (a prune every PRUNE_EVERY puts, as the background task
                would).

  python benchmarks/store_speed.py [--responses 100000] [--bound 1000] [--samples 500]
                                   [--prune-every 100] [--writers 8] [--url URL]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from qualflow.server.store import StoredResponse, open_store, owner_of

OWNER = owner_of("sk-bench")
TEXT = "The quick brown fox jumps over the lazy dog. " * 4


def turn(n: int, previous: str | None) -> tuple[StoredResponse, list[dict], list[dict]]:
    rid = f"resp_{n:012d}"
    outputs = [
        {
            "id": f"rs_{n}",
            "type": "reasoning",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": TEXT}],
        },
        {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": TEXT, "annotations": []}],
        },
    ]
    body = {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": "tiny",
        "output": outputs,
        "previous_response_id": previous,
        "usage": {"input_tokens": 120, "output_tokens": 80, "total_tokens": 200},
    }
    inputs = [
        {
            "id": f"in_{n}",
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": TEXT}],
        }
    ]
    return (
        StoredResponse(rid, OWNER, time.time(), "tiny", "completed", body, previous),
        inputs,
        outputs,
    )


def percentiles(xs: list[float]) -> str:
    xs = sorted(xs)
    p99 = xs[int(0.99 * (len(xs) - 1))]
    return f"p50 {statistics.median(xs) * 1e3:.3f} ms  p99 {p99 * 1e3:.3f} ms"


def disk_size(url: str) -> str:
    path = Path(url.removeprefix("sqlite:///"))
    sizes = {s: os.path.getsize(f"{path}{s}") for s in ("", "-wal") if os.path.exists(f"{path}{s}")}
    return "  ".join(
        f"{'main' if s == '' else s[1:]} {b / 2**20:.2f} MiB" for s, b in sizes.items()
    )


def concurrent_writes(store, n: int, writers: int, samples: int) -> int:
    """`samples` puts from `writers` threads at once (as the server's worker threads put the
    responses of concurrent requests); prints each put's time and the puts per second. The next
    free response number."""
    barrier, times = threading.Barrier(writers), [[] for _ in range(writers)]

    def writer(w: int) -> None:
        barrier.wait()
        for k in range(w, samples, writers):
            r = turn(n + k, None)
            t0 = time.perf_counter()
            store.put(*r)
            times[w].append(time.perf_counter() - t0)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    print(
        f"write, {writers} writers ({samples} puts): {percentiles(sum(times, []))}  "
        f"{samples / wall:.0f} puts/s"
    )
    return n + samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--responses", type=int, default=100_000, help="responses stored for the size run"
    )
    ap.add_argument("--bound", type=int, default=1000, help="retention bound of the size run")
    ap.add_argument("--prune-every", type=int, default=100, help="puts between two prunes")
    ap.add_argument("--samples", type=int, default=500, help="timed puts and chain loads")
    ap.add_argument(
        "--writers",
        type=int,
        default=8,
        help="threads putting at once (1: the sequential run only)",
    )
    ap.add_argument(
        "--url", default=None, help="store URL (default: a SQLite file in a temp folder)"
    )
    args = ap.parse_args()
    url = args.url or f"sqlite:///{tempfile.mkdtemp(prefix='store-speed-')}/store.db"
    store = open_store(url)
    n, writes = 0, []
    for _ in range(args.samples):
        r = turn(n, None)
        t0 = time.perf_counter()
        store.put(*r)
        writes.append(time.perf_counter() - t0)
        n += 1
    print(f"write ({args.samples} puts): {percentiles(writes)}")
    if args.writers > 1:
        n = concurrent_writes(store, n, args.writers, args.samples)

    previous = None
    for _ in range(10):
        r = turn(n, previous)
        store.put(*r)
        previous, n = r[0].id, n + 1
    loads = []
    for _ in range(args.samples):
        t0 = time.perf_counter()
        chain = store.chain(OWNER, previous)
        loads.append(time.perf_counter() - t0)
    assert len(chain.items) == 30, len(chain.items)
    print(f"chain load (10 turns, {len(chain.items)} items): {percentiles(loads)}")

    t0 = time.perf_counter()
    while n < args.responses:
        store.put(*turn(n, None))
        n += 1
        if n % args.prune_every == 0:
            store.prune(
                now=time.time(), max_age_s=None, max_responses=args.bound, batch=args.prune_every
            )
    store.prune(now=time.time(), max_age_s=None, max_responses=args.bound, batch=args.responses)
    elapsed = time.perf_counter() - t0
    with store.engine.connect() as conn:
        kept = conn.exec_driver_sql("SELECT count(*) FROM responses").scalar()
    size = disk_size(url) if url.startswith("sqlite:///") else "(not a SQLite file)"
    print(
        f"size after {n} responses, bound {args.bound}: {kept} kept; {size}; "
        f"{elapsed:.1f} s for the size run"
    )
    store.close()


if __name__ == "__main__":
    main()
