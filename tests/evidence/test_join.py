"""The request-level join: every client and every server record accounted for (matched / client-only
/ server-only), warm-up flagged and excluded from summaries, client and server timing kept apart,
and the qualification status ladder."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from fixtures.sessions import POINT, build_joined, join, make_session
from qualflow.evidence.requests import match
from qualflow.evidence.schema import SCHEMA_VERSION, TABLES
from qualflow.evidence.status import StatusInputs, accounting_ok, qualification_status
from qualflow.server.timing import new_record


def test_all_matched_qualifies(tmp_path):
    res, ev = build_joined(tmp_path)
    req, summ, runs = ev["requests"], ev["summary"], ev["runs"]
    assert list(req.columns) == list(TABLES["requests"])
    assert set(req["schema_version"]) == {SCHEMA_VERSION}
    prof = req[req["phase"] == "profiling"]
    assert len(prof) == 3 and set(prof["match_status"]) == {"matched"}
    # warm-up: the session's and AIPerf's, kept and flagged
    warm = req[req["is_warmup"]]
    assert set(warm["request_id"]) == {"warmup-000", "w0"} and set(warm["match_status"]) == {
        "matched"
    }
    assert set(req[req["phase"] == "protocol"]["request_id"]) == {"protocol-a", "protocol-b"}
    s = summ.iloc[0]
    assert s["n_client"] == s["n_server"] == s["n_matched"] == 3
    assert s["n_warmup_excluded"] == 1 and s["n_client_only"] == 0 and s["n_server_only"] == 0
    # client and server timing apart, with their difference
    row = prof.iloc[0]
    assert row["client_e2e_ms"] == pytest.approx(100.0)
    assert row["public_task_call_wall_ms"] == pytest.approx(90.0)
    assert row["client_minus_task_wall_ms"] == pytest.approx(10.0)
    assert row["client_request_latency_ms"] == 95.0
    assert row["input_sha256"] and row["output_chars"] == 5
    assert res["statuses"] == {"tiny_c2": "aiperf-qualified"}
    r = runs.iloc[0]
    assert r["status"] == "aiperf-qualified" and r["bundle_hash"] == "h" * 64
    assert r["dataset_sha256"] == "ab" * 32 and json.loads(r["packages"]) == {"aiperf": "0.13.0"}
    assert r["checkpoint_revision"] == "content-sha256:" + "c" * 64
    assert len(ev["protocol"]) == 2 and len(ev["correctness"]) == 1


def test_client_only_and_server_only_are_counted(tmp_path):
    res, ev = build_joined(tmp_path, drop_server=("p1",), extra_server=("stray-1",))
    req = ev["requests"]
    assert req.set_index("request_id").loc["p1", "match_status"] == "client-only"
    stray = req.set_index("request_id").loc["stray-1"]
    assert stray["match_status"] == "server-only" and stray["point_id"] == "tiny_c2"
    s = ev["summary"].iloc[0]
    assert (
        s["n_client"],
        s["n_server"],
        s["n_matched"],
        s["n_client_only"],
        s["n_server_only"],
    ) == (3, 3, 2, 1, 1)
    assert res["statuses"]["tiny_c2"] == "protocol-conformant"
    assert "client-only" in ev["runs"].iloc[0]["status_reasons"]
    # nothing lost: every client record and every server record is one row
    n_client = 1 + 2 + 4  # session warm-up, protocol, AIPerf (1 warm-up + 3 profiling)
    n_server_only = 1
    assert len(req) == n_client + n_server_only


def test_server_not_honouring_osl_blocks_qualification(tmp_path):
    res, ev = build_joined(tmp_path, osl_tokens=12)
    assert ev["summary"].iloc[0]["n_server_osl_mismatch"] == 3
    assert res["statuses"]["tiny_c2"] == "protocol-conformant"


def test_match_keeps_every_record_of_a_duplicated_id():
    rows = match(
        [{"request_id": "a", "phase": "profiling"}],
        [
            new_record("a", "resp_1", "aiperf:x", True, 0),
            new_record("a", "resp_2", "aiperf:x", True, 0),
        ],
    )
    assert [r["match_status"] for r in rows] == ["matched", "server-only"]  # no server record lost
    assert all(r["duplicate_request_id"] for r in rows)
    assert {r["server_response_id"] for r in rows} == {"resp_1", "resp_2"}


def test_duplicated_server_record_fails_accounting_naming_the_id(tmp_path):
    res, ev = build_joined(tmp_path, extra_server=("p1",))
    s = ev["summary"].iloc[0]
    assert s["duplicate_request_ids"] == "p1" and s["n_server_only"] == 1
    assert res["statuses"]["tiny_c2"] == "protocol-conformant"
    assert (
        "duplicated request ids" in ev["runs"].iloc[0]["status_reasons"]
        and "p1" in ev["runs"].iloc[0]["status_reasons"]
    )


def test_a_failing_protocol_check_is_not_qualified(tmp_path):
    res, ev = build_joined(tmp_path, protocol_ok=False)
    assert res["statuses"]["tiny_c2"] == "family-validated"
    assert "1 of 2 protocol checks failed (reject_x)" in ev["runs"].iloc[0]["status_reasons"]


def test_disabled_protocol_checks_stop_below_their_rung(tmp_path):
    res, ev = build_joined(tmp_path, session_extra={"settings": {"protocol_checks": False}})
    assert res["statuses"]["tiny_c2"] == "family-validated"
    assert "protocol checks disabled" in ev["runs"].iloc[0]["status_reasons"]
    assert json.loads(ev["runs"].iloc[0]["server_settings"]) == {"protocol_checks": False}


def test_a_session_failure_is_a_reason(tmp_path):
    err = {
        "stage": "aiperf:tiny_c2",
        "type": "ServerCrashed",
        "message": "server exited with code -9",
    }
    res, ev = build_joined(tmp_path, session_extra={"error": err})
    assert res["statuses"]["tiny_c2"] == "protocol-conformant"
    assert (
        "session failed in aiperf:tiny_c2: ServerCrashed: server exited with code -9"
        in ev["runs"].iloc[0]["status_reasons"]
    )


def test_an_allowed_unpinned_client_caps_the_status(tmp_path):
    why = (
        "aiperf 0.14.0 (/usr/bin/aiperf) is not the pinned aiperf==0.13.0 "
        "(allowed by allow_unpinned_client)"
    )
    res, ev = build_joined(tmp_path, session_extra={"client_pin_reasons": [why]})
    assert (
        res["statuses"]["tiny_c2"] == "protocol-conformant"
        and why in ev["runs"].iloc[0]["status_reasons"]
    )


CORR_OK = pd.DataFrame(
    [{"case_id": "c", "criterion": "k", "passed": True, "thresholds_version": "v1"}]
)
PROTO_OK = pd.DataFrame([{"name": "n", "passed": True}])


@pytest.mark.parametrize(
    "kw,expected",
    [
        (dict(implemented=False), "planned"),
        (dict(correctness=CORR_OK.assign(passed=False)), "implemented"),
        (dict(correctness=pd.DataFrame()), "implemented"),
        (dict(expected_thresholds_version="v2"), "implemented"),
        (dict(protocol=PROTO_OK.assign(passed=False)), "family-validated"),
        (dict(protocol=pd.DataFrame()), "family-validated"),
        (dict(protocol_enabled=False), "family-validated"),
        (dict(aiperf_ok=False), "protocol-conformant"),
        (dict(accounting_ok=False), "protocol-conformant"),
        (
            dict(client_pin_reasons=["openai 3.0 is not the pinned openai==3.57.0"]),
            "protocol-conformant",
        ),
        (dict(), "aiperf-qualified"),
        (dict(slo=(False, ["SLO ttft_ms.p50 missed"])), "aiperf-qualified"),
        (dict(slo=(True, [])), "slo-met"),
    ],
)
def test_status_ladder(kw, expected):
    args = dict(
        implemented=True,
        correctness=CORR_OK,
        protocol=PROTO_OK,
        protocol_enabled=True,
        aiperf_ok=True,
        aiperf_reasons=["x"],
        accounting_ok=True,
        accounting_reasons=["y"],
        expected_thresholds_version=None,
    )
    args.update(kw)
    slo = args.pop("slo", None)
    status, reasons = qualification_status(StatusInputs(**args), slo)
    assert status == expected
    assert bool(reasons) == (expected != "slo-met")  # aiperf-qualified says why not slo-met


def test_accounting_requires_equal_counts():
    base = dict(
        request_count=3,
        n_client=3,
        n_server=3,
        n_matched=3,
        n_client_only=0,
        n_server_only=0,
        n_errors=0,
        n_server_osl_mismatch=0,
    )
    assert accounting_ok(base)[0]
    assert not accounting_ok({**base, "n_server": 2, "n_matched": 2, "n_client_only": 1})[0]
    assert not accounting_ok({**base, "n_errors": 1})[0]


def test_runs_commands_hold_what_each_stage_recorded(tmp_path):
    """runs.commands: the server's argv and the AIPerf command as the session recorded them, and
    the command line each stage recorded in its own output (pin.json, the bundle manifest, the
    correctness file, session.json), and the join's own."""
    from qualflow.correctness.table import write_correctness
    from qualflow.invocation import set_argv

    s, _ = make_session(tmp_path, session_extra={"command": "qualflow session --out s"})
    for name, cmd in (
        ("pin.json", "qualflow pin --out pin.json"),
        ("bundle/manifest.json", "qualflow build --out bundle"),
    ):
        d = json.loads((tmp_path / name).read_text())
        (tmp_path / name).write_text(json.dumps({**d, "command": cmd}))
    write_correctness(
        pd.read_parquet(tmp_path / "corr.parquet"),
        tmp_path / "corr.parquet",
        "qualflow correctness --out corr.parquet",
    )
    set_argv(["join", "--out", "ev"])
    try:
        _, ev = join(tmp_path, s)
    finally:
        set_argv([])
    assert json.loads(ev["runs"].iloc[0]["commands"]) == {
        "server": ["qualflow", "serve"],
        "aiperf": "aiperf profile ...",
        "pin": "qualflow pin --out pin.json",
        "build": "qualflow build --out bundle",
        "correctness": "qualflow correctness --out corr.parquet",
        "session": "qualflow session --out s",
        "join": "qualflow join --out ev",
    }


def test_the_join_takes_points_and_their_slos_from_points_json(tmp_path, capsys):
    from qualflow.cli import main
    from qualflow.workload import PointPlan

    s, _ = make_session(tmp_path)
    loose = {"ttft_ms": {"p50": 1000}, "max_error_rate": 0}
    PointPlan.from_json({"points": [POINT], "slos": {"tiny_c2": loose}}).write(
        tmp_path / "points.json"
    )
    argv = [
        "join",
        "--session",
        str(s),
        "--correctness",
        str(tmp_path / "corr.parquet"),
        "--bundle",
        str(tmp_path / "bundle"),
        "--pin",
        str(tmp_path / "pin.json"),
        "--model",
        "embedded",
        "--profile",
        "fp16",
        "--software-key",
        "k",
        "--points",
        str(tmp_path / "points.json"),
        "--out",
        str(tmp_path / "ev"),
    ]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["statuses"] == {"tiny_c2": "slo-met"}
    runs = pd.read_parquet(tmp_path / "ev" / "runs.parquet")
    assert json.loads(runs.iloc[0]["commands"])["join"] == "qualflow " + " ".join(argv)
    assert json.loads(runs.iloc[0]["workload"])["seed"] == 42  # the point as the session ran it
    for gone in (["--slo", "{}"], ["--commands", "{}"]):  # the plan and the stages say it now
        assert main(argv + gone) == 2
