"""The state protocol checks (session.state_checks): gated on /health's `store` capability (an
endpoint on its config), passing against our server with a store and two keys, failing against one
without a store; and a session with `state` serving with a store under its directory and the
session's API keys, whose checks and settings say so."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from fixtures.stateful import model_of, stateful_server
from qualflow.runtime.config import EngineConfig
from qualflow.session.config import SessionConfig
from qualflow.session.conformance import Checker
from qualflow.session.state import KEYS_VAR, session_keys
from qualflow.session.state_checks import StateSupport, state_checks, state_support

pytestmark = pytest.mark.timeout(600)
KEYS = ("key-one-0123456789", "key-two-0123456789")
STATE_CHECKS = {
    "state_store_and_retrieve",
    "state_continue_previous_response_id",
    "state_not_found_after_delete",
    "state_input_items_order_and_pages",
    "state_conversation_items",
}


def _run(srv, key: str | None, support: StateSupport) -> dict[str, tuple[bool, str]]:
    from qualflow.session.conformance import CheckFailed

    checker = Checker(srv.url, model_of(srv), api_key=key)
    out = {}
    for name, fn in state_checks(support)(checker):
        try:
            out[name] = (True, fn(f"t-{name}"))
        except (CheckFailed, Exception) as e:  # noqa: BLE001 - the row's failure, as the session's
            out[name] = (False, f"{type(e).__name__}: {e}")
    return out


def test_the_checks_run_where_the_stack_stores():
    endpoint = object()
    assert state_support({"capabilities": ["text-generation"]}) is None
    assert state_support({"capabilities": ["store"]}, keys=KEYS) == StateSupport(KEYS)
    assert state_support({}, endpoint, stateful=False) is None
    assert state_support({}, endpoint, stateful=True) == StateSupport()  # its key is not ours
    assert state_checks(None) is None


def test_they_pass_against_a_store_with_two_keys(bundle_dir, tmp_path):
    srv = stateful_server(bundle_dir, tmp_path, str(tmp_path / "store.db"), keys=KEYS)
    srv.start()
    try:
        rows = _run(srv, KEYS[0], StateSupport(KEYS))
    finally:
        srv.stop()
    assert set(rows) == STATE_CHECKS | {"state_key_isolation"}
    assert all(ok for ok, _ in rows.values()), rows
    assert "refuse another key" in rows["state_key_isolation"][1]


def test_they_fail_against_a_server_without_a_store(bundle_dir, tmp_path):
    from fixtures.server import ServerUnderTest

    srv = ServerUnderTest(bundle_dir, tmp_path, model_name="m").start()
    try:
        rows = _run(srv, None, StateSupport())
    finally:
        srv.stop()
    assert set(rows) == STATE_CHECKS  # one key: no isolation check
    assert not any(ok for ok, _ in rows.values()), rows


def test_a_stateful_session_serves_with_a_store_and_keys(tmp_path, bundle_dir):
    from qualflow.aiperf.exports import Verdict
    from qualflow.aiperf.record import PointRun
    from qualflow.session.run import run_session
    from qualflow.session.server_process import ServerProcess

    made, clients = [], []

    def factory(server, engine, *, log_path):
        made.append(ServerProcess(server, engine, log_path=log_path))
        return made[-1]

    def runner(point, client, *, point_dir, **_):
        clients.append(client)
        rec = PointRun(point=point, command="stand-in", exit_code=0, verdict=Verdict(ok=True))
        point_dir.mkdir(parents=True, exist_ok=True)
        rec.write(point_dir / "run.json")
        return rec

    points = [{"point_id": "p", "concurrency": 1, "isl": 8, "osl": 4, "request_count": 2}]
    cfg = SessionConfig(
        bundle=str(bundle_dir),
        out=str(tmp_path / "s"),
        points=json.dumps(points),
        model_name="m",
        startup_timeout=120,
        warmup_requests=1,
        warmup_max_tokens=2,
        state=True,
        engine=EngineConfig(device="cpu", cpu_threads=1),
    )
    assert run_session(cfg, server_factory=factory, point_runner=runner) == 0
    out = tmp_path / "s"
    server = made[0].server
    assert server.store.url == str(out / "store.db") and (out / "store.db").is_file()
    keys = session_keys(made[0].env)
    assert len(keys) == 2 and server.api_key == f"env:{KEYS_VAR}"
    assert clients[0].api_key == keys[0]  # AIPerf and every other client send the first key
    s = json.loads((out / "session.json").read_text())
    assert not any(k in json.dumps(s) for k in keys)  # the keys are in no record
    assert s["settings"]["store"] == "sqlite" and s["settings"]["api_keys"] == 2
    rows = pd.read_parquet(out / "protocol.parquet")
    state = rows[rows["name"].str.startswith("state_")]
    assert set(state["name"]) == STATE_CHECKS | {"state_key_isolation"}
    assert rows["passed"].all(), rows[~rows["passed"]].to_dict("records")
    # off: no store, no key, no state checks
    off = dataclasses.replace(cfg, state=False, out=str(tmp_path / "off"), protocol=False)
    assert run_session(off, server_factory=factory, point_runner=runner) == 0
    assert made[1].server.store.url is None and made[1].server.api_key is None
    assert clients[1].api_key is None
    assert "store" not in json.loads((tmp_path / "off" / "session.json").read_text())["settings"]
