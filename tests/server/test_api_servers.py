"""`qualflow serve --api-server-count 2` on the synthetic engine, over real uvicorn: one engine
process behind two API processes that serve one socket. Concurrent streams complete with their
exact token counts and are served by both API processes (their per-request log lines name them),
every request's timing record lands in the one timing log as a whole line, a second server on the
port exits 2; admission is the server's in all (its limit holds across both processes: 429), 413
and 415 hold, a client that leaves cancels; a graceful stop (SIGTERM to the serve process alone)
lets an open stream finish and leaves no process. A killed engine process gives 503 and
`response.failed` on every API process; a killed API process stops the whole server, which says
so and exits 1. Config validation names the key."""

from __future__ import annotations

import concurrent.futures as cf
import os
import re
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

from fixtures.procs import descendants, wait_gone
from fixtures.server import ServerUnderTest
from fixtures.sse import check_stream, sse_frames
from qualflow.server.timing import read_timing_log

pytestmark = pytest.mark.timeout(180)
BATCH, QUEUE = 8, 16
LIMIT = BATCH + QUEUE
LONG = 1500  # tokens: 7.5 s at 5 ms a step, within the bundle's context
ARGS = (
    "--engine",
    "synthetic",
    "--step-ms",
    "5",
    "--max-batch",
    str(BATCH),
    "--max-queue",
    str(QUEUE),
    "--max-body-bytes",
    "4096",
    "--api-server-count",
    "2",
)
SERVED = re.compile(r"\[api (\d) pid (\d+)\]: request_id=(\S+) .* http=(\d+)")
ADMITTED = re.compile(r"API process \d \(pid (\d+)\) admitted (\d+) requests")
STARTED = re.compile(r"2 API processes \[(\d+), (\d+)\], engine process (\d+)")


def body(n: int, stream: bool = True, text: str = "Hello there") -> dict:
    return {"model": "m", "input": text, "stream": stream, "max_output_tokens": n}


def start(bundle_dir, tmp_path_factory, name: str) -> ServerUnderTest:
    return ServerUnderTest(bundle_dir, tmp_path_factory.mktemp(name), *ARGS, model_name="m").start(
        timeout_s=120
    )


@pytest.fixture(scope="module")
def srv(bundle_dir, tmp_path_factory):
    s = start(bundle_dir, tmp_path_factory, "api2")
    yield s
    s.stop()


def pids(s: ServerUnderTest) -> tuple[set[int], int]:
    """(the API processes' pids, the engine process's), as the serve process names them on
    stderr."""
    m = STARTED.search(s.log())
    return {int(m[1]), int(m[2])}, int(m[3])


def served(
    s: ServerUnderTest, prefix: str, n: int, timeout_s: float = 15
) -> dict[str, tuple[int, int]]:
    """request id -> (API process pid, HTTP status) of the `n` requests whose ids start with
    `prefix`, from the API processes' per-request log lines (written once each record is final)."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = {
            rid: (int(pid), int(http))
            for _, pid, rid, http in SERVED.findall(s.log())
            if rid.startswith(prefix)
        }
        if len(got) >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def stream(url: str, rid: str, n: int) -> tuple[int, str, int]:
    r = httpx.post(
        url + "/v1/responses",
        json=body(n, text=f"Hello {rid}"),
        headers={"X-Request-ID": rid},
        timeout=60,
    )
    frames = sse_frames(r.text)
    return r.status_code, check_stream(frames), frames[-1][1]["response"]["usage"]["output_tokens"]


def test_concurrent_streams_complete_on_both_api_processes_and_are_all_logged(srv):
    api, _ = pids(srv)
    n, tokens = 64, 24
    with cf.ThreadPoolExecutor(
        16
    ) as ex:  # each request on a new connection, within the admission limit
        results = list(ex.map(lambda i: stream(srv.url, f"many-{i}", tokens), range(n)))
    assert all(status == 200 and text and out == tokens for status, text, out in results)
    by = served(srv, "many-", n)
    assert len(by) == n and {pid for pid, _ in by.values()} == api, by  # both processes served
    records = [
        r for r in read_timing_log(srv.timing_log) if r.request_id.startswith("many-")
    ]  # strict: whole lines
    assert sorted(r.request_id for r in records) == sorted(f"many-{i}" for i in range(n))
    assert all(
        r.status == "incomplete" and r.output_tokens == tokens and r.http_sent_ns for r in records
    )
    h = httpx.get(srv.url + "/health", timeout=10).json()
    assert h["status"] == "ok" and h["api_server_count"] == 2 and h["admission_limit"] == LIMIT
    # one server per port: a second one on it exits 2 before it starts anything
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "qualflow.cli",
            "serve",
            "--bundle",
            str(srv.server.bundle),
            "--port",
            str(srv.port),
            "--api-server-count",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and f"port {srv.port}" in p.stderr and "in use" in p.stderr


def _hold(url: str, rid: str, leave: threading.Event, opened: threading.Event) -> None:
    with (
        httpx.Client(timeout=60) as c,
        c.stream(
            "POST", url + "/v1/responses", json=body(LONG), headers={"X-Request-ID": rid}
        ) as r,
    ):
        for _ in r.iter_lines():
            opened.set()
            if leave.is_set():
                return


def test_admission_is_the_servers_across_processes_and_limits_hold(srv):
    leave, threads, opened = threading.Event(), [], [threading.Event() for _ in range(LIMIT)]
    for i in range(
        LIMIT
    ):  # exactly the server's limit, open at once (batch running, the rest queued)
        threads.append(
            threading.Thread(target=_hold, args=(srv.url, f"hold-{i}", leave, opened[i]))
        )
        threads[-1].start()
    try:
        assert all(o.wait(20) for o in opened)
        assert httpx.get(srv.url + "/health", timeout=10).json()["active_requests"] == LIMIT
        for i in range(6):  # new connections, whichever process takes them: 429 at once
            r = httpx.post(
                srv.url + "/v1/responses",
                json=body(4, stream=False),
                headers={"X-Request-ID": f"over-{i}"},
                timeout=10,
            )
            assert r.status_code == 429 and r.headers["retry-after"] == "1", r.text
            assert r.json()["error"]["code"] == "rate_limit_exceeded"
    finally:
        leave.set()  # every holder leaves: its request is cancelled
        for t in threads:
            t.join(timeout=30)
    recs = {}
    deadline = time.monotonic() + 15
    while len(recs) < LIMIT and time.monotonic() < deadline:
        recs = {
            r.request_id: r
            for r in read_timing_log(srv.timing_log)
            if r.request_id.startswith("hold-")
        }
        time.sleep(0.1)
    assert len(recs) == LIMIT and all(
        r.status == "cancelled" and r.output_tokens < LONG for r in recs.values()
    )
    assert httpx.get(srv.url + "/health", timeout=10).json()["active_requests"] == 0
    for _ in range(4):
        r = httpx.post(
            srv.url + "/v1/responses",
            content=b"x" * 5000,
            headers={"content-type": "application/json"},
            timeout=10,
        )
        assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
        r = httpx.post(
            srv.url + "/v1/responses",
            content=b"{}",
            headers={"content-type": "text/plain"},
            timeout=10,
        )
        assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_content_type"


def test_sigterm_to_the_serve_process_stops_gracefully_and_leaves_no_process(srv):
    api, engine = pids(srv)
    below = descendants(srv.proc.pid)
    assert api | {engine} <= set(below)
    done = {}

    def at_stop():
        done["result"] = stream(srv.url, "at-stop", 200)

    t = threading.Thread(target=at_stop)
    t.start()
    deadline = time.monotonic() + 10
    while (
        httpx.get(srv.url + "/health", timeout=10).json()["active_requests"] == 0
        and time.monotonic() < deadline
    ):
        time.sleep(0.02)
    os.kill(srv.proc.pid, signal.SIGTERM)  # the serve process alone: it stops the others
    assert (
        srv.proc.wait(timeout=60) == -signal.SIGTERM
    )  # re-raised after the graceful stop, as uvicorn does
    t.join(timeout=30)
    assert done["result"][0] == 200 and done["result"][2] == 200  # the open stream finished
    assert wait_gone(below) == []
    records = read_timing_log(srv.timing_log)
    assert [r.status for r in records if r.request_id == "at-stop"] == ["incomplete"]
    # each API process says at its stop how many requests it admitted: every record's but the 429s'
    admitted = {int(pid): int(n) for pid, n in ADMITTED.findall(srv.log())}
    assert set(admitted) == api and sum(admitted.values()) == sum(
        r.http_status != 429 for r in records
    )
    assert "Traceback" not in srv.log()


def _open_stream(url: str, rid: str, out: dict, streaming: threading.Event) -> None:
    with (
        httpx.Client(timeout=60) as c,
        c.stream(
            "POST", url + "/v1/responses", json=body(LONG), headers={"X-Request-ID": rid}
        ) as r,
    ):
        text = ""
        for chunk in r.iter_text():
            text += chunk
            if "event: response.output_text.delta" in text:
                streaming.set()
        out[rid] = text


def late(url: str, rid: str) -> tuple[int, str]:
    r = httpx.post(
        url + "/v1/responses", json=body(4, stream=False), headers={"X-Request-ID": rid}, timeout=10
    )
    return r.status_code, r.json()["error"]["code"]


def test_dead_engine_fails_every_api_process_and_a_dead_api_process_stops_the_server(
    bundle_dir, tmp_path_factory
):
    s = start(bundle_dir, tmp_path_factory, "api2-dying")
    try:
        api, engine = pids(s)
        below = descendants(s.proc.pid)
        out, threads = {}, []
        for i in range(4):
            streaming = threading.Event()
            threads.append(
                threading.Thread(target=_open_stream, args=(s.url, f"open-{i}", out, streaming))
            )
            threads[-1].start()
            assert streaming.wait(20)
        os.kill(engine, signal.SIGKILL)
        for t in threads:
            t.join(timeout=30)
        for text in out.values():  # every open stream, whichever process served it
            frames = sse_frames(text)
            assert [k for k, _ in frames][-2:] == ["error", "response.failed"]
            assert "engine process" in frames[-1][1]["response"]["error"]["message"]
        for wave in range(
            5
        ):  # bursts of new connections (one at a time, an idle box may give all to one process)
            with cf.ThreadPoolExecutor(8) as ex:
                answers = list(
                    ex.map(lambda i, wave=wave: late(s.url, f"late-{wave}-{i}"), range(8))
                )
            assert all(status == 503 and code == "engine_failed" for status, code in answers), (
                answers
            )
            if {pid for pid, _ in served(s, f"late-{wave}-", 8).values()} == api:
                break
        assert {pid for pid, http in served(s, "late-", 8).values() if http == 503} == api
        assert f"engine process (pid {engine}) was killed by signal 9" in s.log()
        # an API process that dies takes the server down: it says so and exits 1, leaving nothing
        victim = min(api)
        os.kill(victim, signal.SIGKILL)
        assert s.proc.wait(timeout=60) == 1
        assert f"(pid {victim}) exited with code -9; stopping the server" in s.log()
        assert wait_gone(below) == []
    finally:
        s.stop()


def test_the_count_is_validated_naming_the_key():
    from qualflow.server.config import ServerConfig
    from qualflow.session.config import SessionConfig

    assert ServerConfig(bundle="b").api_server_count == 1
    with pytest.raises(ValueError, match="api_server_count"):
        ServerConfig(bundle="b", api_server_count=0)
    with pytest.raises(ValueError, match="ceiling_api_server_count"):
        SessionConfig(out="o", points="p", ceiling_api_server_count=0)
    p = subprocess.run(
        [sys.executable, "-m", "qualflow.cli", "serve", "--bundle", "b", "--api-server-count", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        p.returncode == 2 and "api_server_count (--api-server-count) must be at least 1" in p.stderr
    )
