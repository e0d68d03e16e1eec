"""The response store across server lifetimes, on SQLite and a real PostgreSQL: a response whose
completion the client received survives `kill -9` of the server and a restart on the same store;
two servers on one PostgreSQL continue each other's responses; a store that cannot be opened fails
the start, naming the URL without its password."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from fixtures.postgres import empty_database
from fixtures.stateful import client, model_of, stateful_server

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def store_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    url = request.getfixturevalue("postgres_url")
    empty_database(url)
    return url


def test_an_acknowledged_response_survives_kill_9(bundle_dir, tmp_path, store_url):
    srv = stateful_server(bundle_dir, tmp_path / "one", store_url).start()
    try:
        c, model = client(srv), model_of(srv)
        done = c.responses.create(model=model, input="keep me", max_output_tokens=2)
        events = list(c.responses.create(model=model, input="me too", stream=True))
        streamed = events[-1].response
    finally:
        os.killpg(srv.proc.pid, signal.SIGKILL)  # right after: no graceful stop
        srv.proc.wait(timeout=30)
    again = stateful_server(bundle_dir, tmp_path / "two", store_url).start()
    try:
        c = client(again)
        assert c.responses.retrieve(done.id).model_dump() == done.model_dump()
        assert c.responses.retrieve(streamed.id).output_text == streamed.output_text
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
