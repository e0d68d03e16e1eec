"""The response store across server lifetimes, on SQLite and a real PostgreSQL: a response whose
completion the client received survives `kill -9` of the server, with many more in flight, and a
restart on the same store; two servers on one PostgreSQL continue each other's responses; a store
that cannot be opened fails the start, naming the URL without its password."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import pytest

from fixtures.postgres import empty_database
from fixtures.stateful import client, kill_with_requests_in_flight, model_of, stateful_server

pytestmark = pytest.mark.timeout(600)
IN_FLIGHT, KILL_AFTER = 100, 8  # requests sent at once; completions received before the kill


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def store_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    url = request.getfixturevalue("postgres_url")
    empty_database(url)
    return url


def test_acknowledged_responses_survive_kill_9_with_many_in_flight(bundle_dir, tmp_path, store_url):
    srv = stateful_server(bundle_dir, tmp_path / "one", store_url).start()
    try:
        c, model = client(srv), model_of(srv)
        done = c.responses.create(model=model, input="keep me", max_output_tokens=2)
        events = list(c.responses.create(model=model, input="me too", stream=True))
        streamed = events[-1].response
        # killed (no graceful stop) once KILL_AFTER completions reached the client
        acked, in_flight = kill_with_requests_in_flight(srv, model, IN_FLIGHT, KILL_AFTER)
    finally:
        if srv.proc.poll() is None:
            os.killpg(srv.proc.pid, signal.SIGKILL)
            srv.proc.wait(timeout=30)
    assert len(acked) >= KILL_AFTER and in_flight >= IN_FLIGHT // 2
    again = stateful_server(bundle_dir, tmp_path / "two", store_url).start()
    try:
        c = client(again)
        assert c.responses.retrieve(done.id).model_dump() == done.model_dump()
        assert c.responses.retrieve(streamed.id).output_text == streamed.output_text
        for text, response in acked:
            got = httpx.get(f"{again.url}/v1/responses/{response['id']}", timeout=30)
            assert got.status_code == 200 and got.json() == response
            items = c.responses.input_items.list(response["id"]).data
            assert [i.content[0].text for i in items] == [text]
        follow = c.responses.create(
            model=model, input="next", previous_response_id=done.id, max_output_tokens=2
        )
        assert follow.previous_response_id == done.id
    finally:
        again.stop()


def test_two_servers_on_one_postgres_continue_each_others_responses(
    bundle_dir, tmp_path, postgres_url
):
    empty_database(postgres_url)
    one = stateful_server(bundle_dir, tmp_path / "one", postgres_url).start()
    two = stateful_server(bundle_dir, tmp_path / "two", postgres_url).start()
    try:
        model = model_of(one)
        a = client(one).responses.create(model=model, input="first", max_output_tokens=2)
        b = client(two).responses.create(
            model=model, input="second", previous_response_id=a.id, max_output_tokens=2
        )
        c = client(one).responses.create(
            model=model, input="third", previous_response_id=b.id, max_output_tokens=2
        )
        assert c.previous_response_id == b.id
        assert c.usage.input_tokens > b.usage.input_tokens > a.usage.input_tokens
    finally:
        one.stop()
        two.stop()


def test_a_store_that_cannot_be_opened_fails_the_start_naming_it_without_its_password(
    bundle_dir,
):
    url = "postgresql://qualflow:hunter2secret@127.0.0.1:1/nowhere"
    r = subprocess.run(
        [sys.executable, "-m", "qualflow.cli", "serve", "--bundle", str(bundle_dir)]
        + ["--port", "0", "--store", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert "127.0.0.1:1/nowhere" in r.stderr and "hunter2secret" not in r.stderr
