"""Stale evidence: the status step re-verifies what the join measured (qualflow.evidence.freshness)
against the bundle and the serving session on disk, on hand-made session files."""

from __future__ import annotations

import json
import os
import shutil
from types import SimpleNamespace

import pandas as pd
import pytest

from fixtures.sessions import join, make_session
from qualflow.evidence.freshness import MEASURED, Measured, stale_reasons
from qualflow.files import hash_lines, sha256_file, stat_fingerprint
from qualflow.report.page import main_status

WEIGHTS = bytes(range(256)) * 64


@pytest.fixture(scope="module")
def joined(tmp_path_factory):
    """A session joined against a bundle with one real weights file under its manifest (joined once;
    each test works on a copy, see `copy_of`)."""
    base = tmp_path_factory.mktemp("joined")
    s, _ = make_session(base)
    b = base / "bundle"
    (b / "weights.safetensors").write_bytes(WEIGHTS)
    files = {
        "weights.safetensors": {
            "sha256": sha256_file(b / "weights.safetensors"),
            "size": len(WEIGHTS),
        }
    }
    manifest = json.loads((b / "manifest.json").read_text())
    (b / "manifest.json").write_text(
        json.dumps({**manifest, "files": files, "bundle_hash": hash_lines(files)})
    )
    join(base, s)
    return base


def joined_with_bundle(joined, tmp_path):
    """A copy of the joined tree (mtimes kept, paths relative): its session, bundle and evidence
    dirs."""
    d = tmp_path / "t"
    shutil.copytree(joined, d)
    return d / "session", d / "bundle", d / "ev"


def status(tmp_path, ev, capsys) -> tuple[int, dict]:
    """`qualflow status --require aiperf-qualified` over `ev`: its exit code and its one row."""
    rc = main_status(
        SimpleNamespace(evidence=[str(ev)], out=str(tmp_path / "s.tsv"), require="aiperf-qualified")
    )
    capsys.readouterr()
    (row,) = pd.read_csv(tmp_path / "s.tsv", sep="\t").to_dict("records")
    return rc, row


def test_the_join_records_what_it_measured(joined, tmp_path):
    s, b, ev = joined_with_bundle(joined, tmp_path)
    m = Measured.read(ev)
    assert (
        m.session_run_id == json.loads((ev / MEASURED).read_text())["session_run_id"]
        and m.session_run_id
    )
    assert os.path.normpath(ev / m.session_dir) == str(s) and os.path.normpath(
        ev / m.bundle_dir
    ) == str(b)
    assert set(m.bundle_files) == {"manifest.json", "weights.safetensors"}
    assert stale_reasons(ev) == []


def test_one_byte_changed_in_the_bundle_weights_is_stale(joined, tmp_path, capsys):
    _, b, ev = joined_with_bundle(joined, tmp_path)
    assert (
        status(tmp_path, ev, capsys)[0] == 0
        and status(tmp_path, ev, capsys)[1]["status"] == "aiperf-qualified"
    )
    w = b / "weights.safetensors"
    os.utime(
        w, ns=(w.stat().st_atime_ns, w.stat().st_mtime_ns + 10**9)
    )  # touched only: still the same bytes
    assert stale_reasons(ev) == []
    w.write_bytes(WEIGHTS[:100] + bytes([WEIGHTS[100] ^ 1]) + WEIGHTS[101:])
    (reason,) = stale_reasons(ev)
    assert reason == (
        f"stale evidence: the bundle {b} changed since the run: weights.safetensors no longer "
        "matches its sha256 in the manifest"
    )
    rc, row = status(tmp_path, ev, capsys)
    assert rc == 1 and row["status"] == "planned"
    assert (
        row["status_reasons"].startswith(reason)
        and "its verdict was aiperf-qualified" in row["status_reasons"]
    )


def test_a_rebuilt_bundle_with_other_content_is_stale(joined, tmp_path):
    _, b, ev = joined_with_bundle(joined, tmp_path)
    manifest = json.loads((b / "manifest.json").read_text())
    (b / "manifest.json").write_text(json.dumps({**manifest, "bundle_hash": "f" * 64}))
    (reason,) = stale_reasons(ev)
    assert f"the bundle {b} was rebuilt with other content" in reason


def test_a_session_rerun_cut_off_leaves_no_verdict_standing(joined, tmp_path, capsys):
    """A session killed during `-R aiperf_profile`: Snakemake removed its outputs, the directory
    holds only the new server.log; the previous run's evidence is still there."""
    s, _, ev = joined_with_bundle(joined, tmp_path)
    run_id = Measured.read(ev).session_run_id
    for p in sorted(s.rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    (s / "server.log").write_text("INFO: Started server process\n")
    (reason,) = stale_reasons(ev)
    assert reason == (
        f"stale evidence: the serving session {s} holds no session.json (a rerun of it was cut "
        f"off), the evidence is of run {run_id}"
    )
    rc, row = status(tmp_path, ev, capsys)
    assert rc == 1 and row["status"] == "planned" and row["status_reasons"].startswith(reason)


def test_a_session_rerun_without_a_join_is_stale(joined, tmp_path):
    s, _, ev = joined_with_bundle(joined, tmp_path)
    record = json.loads((s / "session.json").read_text())
    (s / "session.json").write_text(
        json.dumps({**record, "run_id": "embedded.fp16.20261201T000000Z"})
    )
    (reason,) = stale_reasons(ev)
    assert "holds run embedded.fp16.20261201T000000Z, the evidence is of run" in reason


def test_the_stat_fingerprint_sees_a_rewrite_without_reading(tmp_path):
    d = tmp_path / "b"
    assert stat_fingerprint(d) == "absent"
    d.mkdir()
    (d / "w").write_bytes(b"ab")
    (d / ".snakemake_timestamp").write_text("")
    first = stat_fingerprint(d)
    (d / ".snakemake_timestamp").write_text("x")  # Snakemake's marker is not the bundle's content
    assert stat_fingerprint(d) == first
    st = (d / "w").stat()
    (d / "w").write_bytes(b"ac")
    os.utime(d / "w", ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert stat_fingerprint(d) != first
