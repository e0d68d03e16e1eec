"""`qualflow bench server --mode http`: where the server and its client run, and one real round
(uvicorn, the synthetic engine) split into its parts."""

from __future__ import annotations

import math
import os

import pytest

from fixtures.postgres import free_port
from qualflow.bench import http_path
from qualflow.bench.config import ServerBenchConfig

needs_two_cpus = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="pinning needs two CPUs"
)


def test_the_client_gets_the_last_cpu_and_the_server_the_others(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 0, 2, 1})
    assert http_path.cpu_sets(True) == ({0, 1, 2}, {3})
    assert http_path.cpu_sets(False) is None
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {5})
    assert http_path.cpu_sets(True) is None  # one CPU: nothing to split


def _cfg(tmp_path, **kw) -> ServerBenchConfig:
    return ServerBenchConfig(
        work=str(tmp_path), isl=16, osl=8, http_requests=3, port=free_port(), **kw
    )


@needs_two_cpus
def test_the_server_runs_on_the_server_cpus_and_this_thread_moves_to_the_client_cpu(
    bundle_dir, tmp_path
):
    cfg, mine = _cfg(tmp_path), os.sched_getaffinity(0)
    server_cpus, client_cpus = http_path.cpu_sets(True)
    server = http_path.start_server(cfg, bundle_dir, tmp_path / "round", "uvicorn")
    try:
        assert os.sched_getaffinity(server.proc.pid) == server_cpus
        assert os.sched_getaffinity(0) == client_cpus
    finally:
        server.stop()
        os.sched_setaffinity(0, mine)


@needs_two_cpus
@pytest.mark.parametrize("pin", [True, False])
def test_a_round_splits_each_request_and_gives_the_cpus_back(bundle_dir, tmp_path, pin):
    mine = os.sched_getaffinity(0)
    rows = http_path.one_round(_cfg(tmp_path, http_pin=pin), bundle_dir, tmp_path / "r", "uvicorn")
    assert os.sched_getaffinity(0) == mine
    assert len(rows) == 3
    for r in rows:
        assert r["http_in_ms"] > 0 and r["http_out_ms"] > 0 and r["queue_ms"] >= 0
        assert r["http_part_ms"] == pytest.approx(r["http_in_ms"] + r["http_out_ms"])
        # the client's latency (its clock) less the server's span (received to the last write
        # handed to the transport): near zero, of either sign, where the client on the server's
        # CPU reads the tail before that write returns; its arithmetic: test_split
        assert math.isfinite(r["client_beyond_http_ms"])


def test_a_request_carries_its_own_id_as_aiperfs_do():
    import httpx

    seen = []

    def server(request):
        seen.append(request.headers.get("x-request-id"))
        return httpx.Response(200, headers={"x-request-id": seen[-1]}, content=b"data: x\n\n")

    with httpx.Client(transport=httpx.MockTransport(server)) as client:
        rid, latency_ms = http_path._request(client, "http://h/v1/responses", {"model": "m"})
    assert seen == [rid] and len(rid) == 36 and latency_ms > 0


def test_split():
    ms = 1_000_000
    rec = {
        "http_received_ns": 0,
        "submitted_ns": 2 * ms,
        "first_scheduled_ns": 3 * ms,
        "finished_ns": 10 * ms,
        "http_sent_ns": 11 * ms,
    }
    assert http_path.split(rec, 12.5) == {
        "http_in_ms": 2.0,
        "queue_ms": 1.0,
        "http_out_ms": 1.0,
        "http_part_ms": 3.0,
        "client_beyond_http_ms": 1.5,
    }
