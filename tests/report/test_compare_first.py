"""The compare page answers first: one table per point (each side's output tok/s, TTFT and ITL
p50/p99, error rate, status; ratios "×" for throughput and "%" for latency, coloured by verdict),
then the protocol matrix, then the plots; the method, the noise discussion and the full tables
after, collapsible. Sides are named by config names and pinned identities, never machine paths."""

from __future__ import annotations

import pandas as pd

from fixtures.compare_runs import write_run
from qualflow.evidence.compare.config import CompareOptions
from qualflow.evidence.compare.names import no_path, side_name
from qualflow.evidence.store import RunRef, write_table
from qualflow.report.compare import run_compare
from qualflow.report.compare_first import ratio_text

FAST = CompareOptions(resamples=200)


def _two(tmp_path, head_median=2000.0):
    base = write_run(tmp_path, "v1", "m.fp16.A", seed=1, median=100.0)
    head = write_run(tmp_path, "v2", "m.fp16.B", seed=2, median=head_median)
    # the head serves a local checkpoint: its runs name it by an absolute path
    for d in (head, head / "history" / "m.fp16.B"):
        if (d / "runs.parquet").exists():
            r = pd.read_parquet(d / "runs.parquet")
            r["served_model"], r["checkpoint"], r["stack"] = (
                str(tmp_path / "ckpts" / "tiny-qwen"),
                "embedded",
                "endpoint",
            )
            write_table(r, d / "runs.parquet")
    return base, head


def test_first_screen_is_a_table_per_point_then_protocol_then_plots(tmp_path):
    base, head = _two(tmp_path)
    run_compare(str(base), str(head), root=tmp_path, out=tmp_path / "o", opts=FAST)
    html = (tmp_path / "o" / "compare.html").read_text()
    i_table = html.index("<table class='t pt' data-point='w_c1'>")
    assert (
        html.index("<h1>")
        < i_table
        < html.index("id='verdict'")
        < html.index("id='protocol-matrix'")
        < html.index("delta chart")
        < html.index("<details><summary>Method</summary>")
    )
    assert html.index("<details><summary>Method</summary>") < html.index(
        "id='noise-note'"
    )  # collapsible
    table = html[i_table : html.index("</table>", i_table)]
    for head_cell in (
        "output tok/s",
        "TTFT p50 ms",
        "TTFT p99 ms",
        "ITL p50 ms",
        "ITL p99 ms",
        "error rate",
        "status",
    ):
        assert f"<th>{head_cell}</th>" in table, head_cell
    # head 20x slower: throughput 0.05x, latency +1,900 %-ish, both regressions beyond the default
    # floor
    assert "<td class='reg' title='regression beyond a default floor of 50 %'>0.05×</td>" in table
    assert "title='regression beyond a default floor of 50 %'>+1,9" in table
    assert "a default floor of 50 % of the base value" in html
    assert (
        "<span class='imp'>20× the output tok/s</span>" in html
        and "× lower TTFT p50</span>" in html
    )


def test_sides_are_named_by_config_names_never_paths(tmp_path):
    base, head = _two(tmp_path)
    run_compare(str(base), str(head), root=tmp_path, out=tmp_path / "o", opts=FAST)
    html = (tmp_path / "o" / "compare.html").read_text()
    assert str(tmp_path) not in html
    assert "<h1>Compare: base m/fp16 (qualflow) vs head m/fp16 (endpoint)</h1>" in html
    assert "served as tiny-qwen" in html and "software v2" in html


def test_names_and_ratios():
    assert (
        no_path("/home/u/ckpt/qwen3-0.6b") == "qwen3-0.6b"
        and no_path("Qwen/Qwen3-0.6B") == "Qwen/Qwen3-0.6B"
    )
    runs = pd.DataFrame(
        [
            {
                "run_id": "r",
                "stack": "endpoint",
                "checkpoint": "embedded",
                "software_key": "k",
                "served_model": "/tmp/x/tiny",
                "checkpoint_revision": "content-sha256:ab",
            }
        ]
    )
    n = side_name("head", RunRef("k", "r", "tserve", "endpoint", path=None), runs)
    assert n.name == "tserve/endpoint (endpoint)"
    assert (
        n.identity_text()
        == "checkpoint embedded, revision content-sha256:ab, software k, served as tiny"
    )
    assert (
        ratio_text(2550.0, 136.0, True) == "0.0533×"
        and ratio_text(10.0, 225.3, False) == "+2,153 %"
    )


def test_between_stacks_a_change_is_a_difference_between_versions_a_regression(tmp_path):
    base = write_run(tmp_path, "v1", "m.fp16.A", seed=1, median=100.0)
    head = write_run(tmp_path, "v1", "ext.fp16.B", seed=2, median=2000.0, model="ext")
    res = run_compare(str(base), str(head), root=tmp_path, out=tmp_path / "stacks", opts=FAST)
    html = (tmp_path / "stacks" / "compare.html").read_text()
    assert res["kind"] == "cross-stack" and "data-kind='cross-stack'" in html
    assert "title='difference (head worse) beyond a default floor of 50 %'>0.05×</td>" in html
    assert "reads &#x27;difference (head worse) beyond a default floor of 50 %&#x27; (or" in html
    assert "regression" not in html.lower() and "improvement" not in html.lower()
    assert all("regression" not in s for s in res["significant"]) and res["significant"]
    # the same head figures from another version of the same stack: a regression
    other = write_run(tmp_path, "v2", "m.fp16.C", seed=2, median=2000.0)
    res = run_compare(str(base), str(other), root=tmp_path, out=tmp_path / "versions", opts=FAST)
    html = (tmp_path / "versions" / "compare.html").read_text()
    assert res["kind"] == "cross-version" and "difference (head" not in html
    assert "title='regression beyond a default floor of 50 %'>0.05×</td>" in html
