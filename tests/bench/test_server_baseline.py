"""qualflow.bench.server_report: a run is compared only with a committed run that sent the same
requests (ISL, OSL, serve flags, request sampling, API processes); a result that predates a
setting counts as its old default."""

from __future__ import annotations

import json

import pytest

from qualflow.bench import server_report
from qualflow.bench.results import record

GREEDY = {"isl": "128", "osl": "128", "serve_flags": "", "request_sampling": '{"temperature":0}'}


@pytest.fixture
def server_speed(tmp_path, monkeypatch):
    monkeypatch.setattr(server_report, "RESULTS", tmp_path)
    return server_report


def write(d, name: str, **settings) -> None:
    """A committed server result of the H200, in the results schema, in its folder."""
    (d / "NVIDIA-H200").mkdir(exist_ok=True)
    detail = {"isl": "128", "osl": "128", "serve_flags": "", **settings}
    (d / "NVIDIA-H200" / name).write_text(
        json.dumps(record("server", "qwen3-0.6b", "NVIDIA H200", name[:10], {}, detail))
    )


def test_a_run_is_compared_with_one_that_sent_the_same_sampling(server_speed, tmp_path):
    write(tmp_path, "2026-12-01-server.json")  # before request_sampling: temperature 1
    write(tmp_path, "2026-12-02-server-greedy.json", request_sampling='{"temperature":0}')
    write(tmp_path, "2026-12-03-server-t1.json", request_sampling="{}")
    assert (
        server_speed.newest_baseline("NVIDIA-H200", GREEDY).name == "2026-12-02-server-greedy.json"
    )
    default = {**GREEDY, "request_sampling": "{}"}
    assert server_speed.newest_baseline("NVIDIA-H200", default).name == "2026-12-03-server-t1.json"


def test_a_result_from_before_the_setting_ran_the_servers_default(server_speed, tmp_path):
    write(tmp_path, "2026-12-01-server.json")
    assert server_speed.newest_baseline("NVIDIA-H200", GREEDY) is None
    assert (
        server_speed.newest_baseline("NVIDIA-H200", {**GREEDY, "request_sampling": "{}"}).name
        == "2026-12-01-server.json"
    )


def test_a_run_is_compared_with_one_of_as_many_api_processes(server_speed, tmp_path):
    write(tmp_path, "2026-12-02-server.json", request_sampling='{"temperature":0}')  # one
    write(
        tmp_path,
        "2026-12-03-server-api2.json",
        request_sampling='{"temperature":0}',
        api_servers="2",
        ceiling_api_servers="2",
    )
    assert (
        server_speed.newest_baseline("NVIDIA-H200", {**GREEDY, "api_servers": "1"}).name
        == "2026-12-02-server.json"
    )
    two = {**GREEDY, "api_servers": "2", "ceiling_api_servers": "2"}
    assert server_speed.newest_baseline("NVIDIA-H200", two).name == "2026-12-03-server-api2.json"
