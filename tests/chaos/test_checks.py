"""Each check of a chaos cycle passes on a good case and fails on a crafted bad one: a rung claimed
without its evidence, a request missing on one side, an acknowledged stored response gone, a lock
or a process or a temporary file left."""

from __future__ import annotations

import json
import os
import sqlite3
import time

import pandas as pd
import pytest

from qualflow.chaos import checks

RUN, POINT = "run-1", "tiny_c1"


def evidence(tmp_path, n_server=4, corr_passed=True):
    ev = tmp_path / "evidence"
    ev.mkdir()
    pd.DataFrame({"run_id": [RUN], "point_id": [POINT]}).to_parquet(ev / "runs.parquet")
    pd.DataFrame({"run_id": [RUN], "passed": [corr_passed]}).to_parquet(ev / "correctness.parquet")
    pd.DataFrame({"run_id": [RUN], "passed": [True]}).to_parquet(ev / "protocol.parquet")
    summary = dict(run_id=[RUN], point_id=[POINT], request_count=[4], n_client=[4])
    summary.update(n_server=[n_server], n_matched=[min(4, n_server)], n_errors=[0])
    pd.DataFrame(summary).to_parquet(ev / "summary.parquet")
    return ev


def status(tmp_path, rung, reasons="", run=RUN):
    path = tmp_path / "status.tsv"
    row = {"run_id": run, "point_id": POINT, "status": rung, "status_reasons": reasons}
    pd.DataFrame([row]).to_csv(path, sep="\t", index=False)
    return path


def test_a_truthful_status_passes(tmp_path):
    ev = evidence(tmp_path)
    assert checks.status_truthful(status(tmp_path, "aiperf-qualified"), ev).ok


@pytest.mark.parametrize(
    ("rung", "kw", "said"),
    [
        ("aiperf-qualified", {"n_server": 3}, "expected 4"),
        ("family-validated", {"corr_passed": False}, "without passed correctness"),
    ],
)
def test_a_rung_its_evidence_does_not_show_fails(tmp_path, rung, kw, said):
    v = checks.status_truthful(status(tmp_path, rung), evidence(tmp_path, **kw))
    assert not v.ok and said in v.detail


def test_a_status_of_a_run_without_evidence_fails_unless_superseded(tmp_path):
    st = status(tmp_path, "implemented", run="run-gone")
    ev = evidence(tmp_path)  # written after the table: the table is older
    v = checks.status_truthful(st, ev)
    assert not v.ok and "no evidence" in v.detail
    assert checks.status_truthful(st, ev, failed_run=True).ok  # a failed run's stale table
    os.utime(st, (time.time() + 60, time.time() + 60))  # a table newer than the evidence
    assert not checks.status_truthful(st, ev, failed_run=True).ok


def test_a_missing_request_must_be_explained_by_the_status(tmp_path):
    ev = evidence(tmp_path, n_server=3)
    v = checks.accounted(status(tmp_path, "aiperf-qualified"), ev)
    assert not v.ok and "does not say why" in v.detail
    said = status(tmp_path, "protocol-conformant", reasons="accounting: server records 3")
    assert checks.accounted(said, ev).ok
    whole = tmp_path / "whole"
    whole.mkdir()
    assert checks.accounted(status(whole, "aiperf-qualified"), evidence(whole)).ok


def store_with(tmp_path, ids):
    db = tmp_path / "store.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE responses (id TEXT PRIMARY KEY)")
    conn.executemany("INSERT INTO responses VALUES (?)", [(i,) for i in ids])
    conn.commit()
    conn.close()
    return db


def timing_of(tmp_path, *records):
    path = tmp_path / "server_timing.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"torn": ')
    return path


def test_an_acknowledged_stored_response_must_be_in_the_store(tmp_path):
    stored = {"status": "completed", "store_write_ns": 5}
    timing = timing_of(
        tmp_path,
        {"response_id": "resp_a", **stored},
        {"response_id": "resp_b", **stored},
        {"response_id": "resp_c", "status": "completed", "store_write_ns": None},  # store: false
        {"response_id": "resp_d", "status": "failed", "store_write_ns": None},
        {"response_id": "resp_e", "tag": "protocol", **stored},  # a check deleted it on purpose
    )
    assert checks.acknowledged_stored(timing, store_with(tmp_path, ["resp_a", "resp_b"])).ok
    (tmp_path / "store.db").unlink()
    v = checks.acknowledged_stored(timing, store_with(tmp_path, ["resp_a"]))
    assert not v.ok and "resp_b" in v.detail


def test_a_leftover_lock_fails_unless_excused(tmp_path):
    assert checks.no_locks(tmp_path).ok
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("x")
    assert not checks.no_locks(tmp_path).ok
    assert checks.no_locks(tmp_path, excused="Snakemake was SIGKILLed").ok
    (locks / "0.input.lock").unlink()
    gpu = tmp_path / "gpu-locks"
    gpu.mkdir()
    (gpu / "gpu0.lock").write_text("{}")
    v = checks.no_locks(tmp_path, (gpu,), excused="x")
    assert not v.ok and "gpu0.lock" in v.detail


def test_a_leftover_process_port_or_temporary_file_fails(tmp_path):
    assert checks.no_leftovers([], [], [tmp_path]).ok
    assert not checks.no_leftovers(["123 qualflow serve"], [], [tmp_path]).ok
    assert not checks.no_leftovers([], [8000], [tmp_path]).ok
    (tmp_path / "pymp-x").mkdir()
    v = checks.no_leftovers([], [], [tmp_path])
    assert not v.ok and "pymp-x" in v.detail
    assert checks.no_leftovers([], [], None).ok  # after a faulted run: left to its rerun
    aiperf = tmp_path / "elsewhere" / "qf-aiperf-4242-abcdefgh"  # an AIPerf folder of the cycle
    aiperf.mkdir(parents=True)
    v = checks.no_leftovers([], [], [aiperf])
    assert not v.ok and "qf-aiperf-4242" in v.detail


def test_a_sigkilled_snakemakes_own_temporary_folder_is_excused_and_named(tmp_path):
    (tmp_path / "snakemakeab12cd").mkdir()  # tempfile.TemporaryDirectory(prefix="snakemake")
    assert not checks.no_leftovers([], [], [tmp_path]).ok  # Snakemake ended: it is a leftover
    v = checks.no_leftovers([], [], [tmp_path], excused="Snakemake was SIGKILLed")
    assert v.ok and "snakemakeab12cd" in v.detail and "SIGKILLed" in v.detail
    (tmp_path / "pymp-x").mkdir()  # anything else still fails, excused or not
    v = checks.no_leftovers([], [], [tmp_path], excused="Snakemake was SIGKILLed")
    assert not v.ok and "pymp-x" in v.detail and "snakemakeab12cd" not in v.detail


def test_the_aiperf_folders_of_the_cycle_are_found_by_its_pids(tmp_path):
    from qualflow.chaos.cycle import private_tmpdirs

    for name in ("qf-aiperf-4242-abcdefgh", "qf-aiperf-42-abcdefgh", "other-4242-x"):
        (tmp_path / name).mkdir()
    assert private_tmpdirs({4242}, tmp_path) == [tmp_path / "qf-aiperf-4242-abcdefgh"]


def test_a_rerun_completes_unless_a_job_other_than_the_verdict_failed():
    assert checks.rerun_completed(0, "").ok
    below = "Error in rule verdict:\n    jobid: 1\n"
    assert checks.rerun_completed(1, below).ok  # every job ran; the status says why not
    v = checks.rerun_completed(1, below + "Error in rule aiperf_profile:\n")
    assert not v.ok and "aiperf_profile" in v.detail
    assert not checks.rerun_completed(1, "LockException: Directory cannot be locked.").ok
