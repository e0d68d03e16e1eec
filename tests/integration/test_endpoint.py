"""Two stacks in one `snakemake qualify`: our server, and `transformers serve` as an external
endpoint (launched and owned by the workflow, like our server), on the tiny embedded workload; then
`qualflow compare` of the two, and the cross-stack page in headless Chromium.

Asserts each stack's rungs and reasons (transformers serve: endpoint correctness passes, its
protocol failures are recorded, server timing is said to be unavailable, every AIPerf record is
accounted on the client side with its terminal event), the protocol matrix differing where the
stacks differ, and no process left behind. The qualify runs in the background from the start of
the end-to-end tests (workflow/conftest.py), overlapping theirs; this test waits for it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from fixtures.snakemake import TWO_STACKS_KEY as SWKEY
from fixtures.snakemake import pids_in, smk_env


@pytest.mark.slow
def test_two_stacks_qualify_and_compare(two_stacks_launched):
    if shutil.which("transformers") is None:
        pytest.fail(
            "the `transformers` CLI is not on PATH "
            "(transformers serve needs `pip install accelerate`)"
        )
    wf = two_stacks_launched.cwd
    wall = two_stacks_launched.wait().wall_s
    ev = wf / "results" / "evidence" / SWKEY
    ours, theirs = ev / "embedded" / "fp16", ev / "tserve" / "endpoint"
    r_ours, r_theirs = (pd.read_parquet(d / "runs.parquet").iloc[0] for d in (ours, theirs))

    assert r_ours["status"] == "aiperf-qualified", r_ours["status_reasons"]
    assert r_ours["stack"] == "qualflow" and r_ours["server_timing"] == "available"
    assert r_theirs["stack"] == "endpoint" and r_theirs["server_timing"] == "unavailable"
    # reachable, /v1/models names it, endpoint correctness passed; protocol failures stop it there
    assert r_theirs["status"] == "family-validated", r_theirs["status_reasons"]
    assert "protocol checks failed" in r_theirs["status_reasons"]
    assert "server timing not available" in r_theirs["status_reasons"]
    corr = pd.read_parquet(theirs / "correctness.parquet")
    assert len(corr) == 6 and corr["passed"].all(), corr[["case_id", "detail"]].to_string()
    assert set(corr["thresholds_version"]) == {"qwen3-endpoint-correctness-v1"}
    assert not (wf / "results" / "bundle" / SWKEY / "tserve").exists()  # no build, no native Task

    proto = pd.read_parquet(theirs / "protocol.parquet").set_index("name")
    assert not proto.loc["non_stream_response", "passed"]  # `stream` defaults to true there
    assert not proto.loc["stream_incomplete_on_truncation", "passed"]
    assert not proto.loc["reject_unknown_parameter", "passed"]  # 422, not 400
    assert proto.loc["request_id_echo", "passed"]
    assert pd.read_parquet(ours / "protocol.parquet")["passed"].all()

    # client-side accounting: every AIPerf record once, client-only by design, terminal event
    # checked
    req = pd.read_parquet(theirs / "requests.parquet")
    prof = req[req["phase"] == "profiling"]
    assert len(prof) == 4 and (prof["match_status"] == "client-only").all()
    assert (prof["client_terminal_event"] == "response.completed").all() and prof[
        "client_error"
    ].isna().all()
    summ = pd.read_parquet(theirs / "summary.parquet").iloc[0]
    assert summ["n_client"] == 4 and summ["n_server"] == 0 and summ["n_errors"] == 0
    # the endpoint's latency figures: its client-only rows, agreeing with AIPerf's own summary
    aiperf = json.loads(
        next(
            (wf / "results" / "session" / SWKEY / "tserve" / "endpoint").rglob(
                "profile_export_aiperf.json"
            )
        ).read_text()
    )
    for col, tag in (
        ("client_ttft_ms", "time_to_first_token"),
        ("client_itl_ms", "inter_token_latency"),
    ):
        for q in ("p50", "p99"):
            assert pd.notna(summ[f"{col}_{q}"]), (col, q)
            assert summ[f"{col}_{q}"] == pytest.approx(aiperf[tag][q], rel=1e-6), (col, q)
    assert pd.isna(summ["public_task_call_wall_ms_p50"])  # no server timing: null, reason in runs

    html = (wf / "results" / "report" / SWKEY / "report.html").read_text()
    assert (
        "id='protocol-matrix'" in html and "23 of 25 checks differ between the stacks" in html
    )  # 7 tool checks on ours only
    status = (wf / "results" / "status" / f"{SWKEY}.tsv").read_text()
    assert "aiperf-qualified" in status and "family-validated" in status
    assert not pids_in(wf)  # no server, no transformers serve

    # the cross-stack comparison
    cmp_dir = wf / "results" / "compare" / "stacks"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "qualflow.cli",
            "compare",
            "--base",
            str(ours),
            "--head",
            str(theirs),
            "--root",
            str(wf / "results" / "evidence"),
            "--out",
            str(cmp_dir),
            "--resamples",
            "200",
        ],
        cwd=wf,
        env=smk_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads((cmp_dir / "compare.json").read_text())
    assert res["kind"] == "cross-stack" and not res["forced"]
    assert "non_stream_response: base pass, head FAIL" in res["protocol_differs"]
    page = (cmp_dir / "compare.html").read_text()
    assert "data-kind='cross-stack'" in page and "id='protocol-matrix'" in page
    m = pd.read_parquet(cmp_dir / "compare.parquet")
    ttft = m[(m["metric"] == "client_ttft_ms") & (m["stat"] == "p50")].iloc[0]
    assert ttft["n_base"] == 4 and ttft["n_head"] == 4  # the endpoint's client-only rows count

    from qualflow.report.browser import check_page, find_chromium

    if find_chromium() is not None:
        for name, p in (
            ("compare", cmp_dir / "compare.html"),
            ("report", wf / "results" / "report" / SWKEY / "report.html"),
        ):
            shot = check_page(p, wf.parent / "shots" / f"{name}.png")
            assert shot["ok"], shot["errors"]
    print(f"\ntwo-stack qualify wall time on the tiny workload: {wall:.0f}s")
