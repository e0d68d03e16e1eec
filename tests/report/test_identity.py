"""The run report opens with who and what, from the evidence's runs table: model/profile, the
checkpoint's identity (id@revision or content hash), the bundle hash, the software key, the
hardware and the date, above the status ladder and the verdicts; the terminal's verdict begins
with it too."""

from __future__ import annotations

import json
import os
import re

import pandas as pd

from fixtures.sessions import build_joined
from qualflow.report.identity import hardware_text, identity_rows
from qualflow.report.page import write_report
from qualflow.report.verdict import show_verdict


def _text(fragment: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", fragment).split())


def test_the_report_opens_with_the_runs_identity_above_the_ladder_and_verdicts(tmp_path):
    _, tables = build_joined(tmp_path)
    write_report([tmp_path / "ev"], tmp_path / "rep")
    html = (tmp_path / "rep" / "report.html").read_text()
    body = html[html.index("<body>") :]
    opening = body[body.index("</h1>") : body.index("Status ladder")]
    started = tables["runs"]["started_utc"].iloc[0]
    for shown in (
        "embedded/fp16",
        "embedded@content-sha256:" + "c" * 64,
        "h" * 64,
        "0.1.0+gabc",
        "CPU x",
        started,
    ):
        assert shown in _text(opening), shown
    # the ladder (and the evidence path) still there, just below it, and both above the verdicts
    assert (
        body.index("id='identity'")
        < body.index("Status ladder: planned")
        < body.index("<h2>Verdicts</h2>")
    )
    line = (tmp_path / "rep" / "identity.txt").read_text()
    assert line.startswith("model/profile embedded/fp16, checkpoint embedded@content-sha256:")
    assert (
        f"bundle hash {'h' * 64}, software key 0.1.0+gabc, hardware CPU x, date {started}" in line
    )


def test_the_verdict_begins_with_the_identity_of_this_runs_report(tmp_path, capsys):
    build_joined(tmp_path)
    write_report([tmp_path / "ev"], tmp_path / "rep")
    show_verdict(tmp_path / "rep" / "status.tsv", tmp_path / "rep", tmp_path / "cmp")
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("qualflow run: model/profile embedded/fp16, checkpoint embedded@")
    assert out[1] == "qualflow status:"
    # after a failure, a report older than the run is not this run's: no identity from it
    later = (tmp_path / "rep" / "identity.txt").stat().st_mtime + 60
    os.utime(tmp_path / "rep" / "status.tsv", (later + 1, later + 1))  # the table is this run's
    show_verdict(
        tmp_path / "rep" / "status.tsv",
        tmp_path / "rep",
        tmp_path / "cmp",
        failed_since=later - 120,
    )
    assert capsys.readouterr().out.startswith("qualflow run: ")
    show_verdict(
        tmp_path / "rep" / "status.tsv", tmp_path / "rep", tmp_path / "cmp", failed_since=later
    )
    out = capsys.readouterr().out
    assert "qualflow run:" not in out and out.startswith("qualflow status:")


def test_hub_checkpoints_gpus_endpoints_and_dates():
    runs = pd.DataFrame(
        [
            {
                "model": "qwen3",
                "profile": "bf16",
                "checkpoint": "Qwen/Qwen3-0.6B",
                "checkpoint_revision": "abc123",
                "bundle_hash": "b1",
                "software_key": "0.2.0+g1",
                "started_utc": d,
                "gpu": None,
                "hardware": json.dumps({"cpu": "Xeon", "gpus": ["NVIDIA H100", "NVIDIA H100"]}),
            }
            for d in ("2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z")
        ]
        + [
            {
                "model": "ext",
                "profile": "api",
                "stack": "endpoint",
                "served_model": "tiny",
                "software_key": "0.2.0+g1",
                "started_utc": "2026-01-03T00:00:00Z",
                "hardware": json.dumps({"cpu": "Xeon", "gpus": []}),
                "gpu": json.dumps({"name": "NVIDIA H200"}),
            }
        ]
    )
    rows = identity_rows(runs)
    assert [r["model"] for r in rows] == ["qwen3/bf16", "ext/api (endpoint)"]
    assert (
        rows[0]["checkpoint"] == "Qwen/Qwen3-0.6B@abc123"
        and rows[0]["hardware"] == "CPU Xeon; GPU 2× NVIDIA H100"
    )
    assert rows[0]["date"] == "2026-01-01T00:00:00Z to 2026-01-02T00:00:00Z"
    assert rows[1]["checkpoint"] == "none pinned (served as tiny)" and rows[1]["bundle"] == "none"
    assert rows[1]["hardware"] == "CPU Xeon; GPU NVIDIA H200"
    assert hardware_text(None) == "unknown"
