"""A huge prompt arriving mid-stream does not stretch the other streams' inter-token latency: its
parsing, templating and tokenization run off the event loop with the GIL released (a 2 MB prompt
is ~1 s of tokenizing on a 2-core box; done on the loop, or with the GIL held, every stream
stalls that long). Robust on a loaded box: the worst gap while the prompt is handled is compared
with the time the handling took, not with a fixed time; the gaps outside that window are
printed beside it."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from fixtures.server import ServerUnderTest

MODEL = "qualflow-itl"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def srv(bundle_dir, tmp_path_factory):
    s = ServerUnderTest(
        bundle_dir,
        tmp_path_factory.mktemp("itl"),
        "--max-batch",
        "4",
        "--step-delay-s",
        "0.01",
        "--cpu-threads",
        "1",
        model_name=MODEL,
    ).start()
    yield s
    s.stop()


def test_huge_prompt_does_not_stall_other_streams(srv):
    body = {
        "model": MODEL,
        "input": "Go on",
        "stream": True,
        "ignore_eos": True,
        "max_output_tokens": 400,
    }
    stamps: dict[int, list[float]] = {0: [], 1: []}

    def stream(i):
        with httpx.stream("POST", srv.url + "/v1/responses", json=body, timeout=120) as r:
            for line in r.iter_lines():
                if line.startswith("event: response.output_text.delta"):
                    stamps[i].append(time.monotonic())

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    while min(len(s) for s in stamps.values()) < 40:
        time.sleep(0.01)
    t0 = time.monotonic()
    big = httpx.post(
        srv.url + "/v1/responses",
        json={"model": MODEL, "input": "hello world, " * 160_000},
        timeout=120,
    )
    t1 = time.monotonic()
    for t in threads:
        t.join()
    assert big.status_code == 400 and big.json()["error"]["code"] == "context_length_exceeded"
    assert t1 - t0 > 0.5, "the prompt was refused too fast to test anything"

    def gaps(s, inside):
        return [b - a for a, b in zip(s, s[1:]) if (t0 <= b and a <= t1) == inside]

    during = max(g for s in stamps.values() for g in gaps(s, True))
    outside = sorted(g for s in stamps.values() for g in gaps(s, False))
    worst_outside = outside[int(len(outside) * 0.99)]
    print(
        f"huge prompt took {t1 - t0:.2f}s; worst gap during {during * 1e3:.0f} ms, p99 outside "
        f"{worst_outside * 1e3:.0f} ms"
    )
    # handled on the loop (or with the GIL held) the worst gap would be the whole handling time,
    # t1 - t0; off the loop it is a small part of it. Only that ratio is judged: the worst gap
    # also grows with whatever else the machine runs (0.51 s against a p99 of 0.16 s outside,
    # beside a chaos run), and so does the handling time, but not in proportion.
    assert during < 0.5 * (t1 - t0), (during, worst_outside, t1 - t0)
