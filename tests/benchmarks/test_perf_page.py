"""benchmarks/perf_page.py: docs/performance.md is what the committed results give (a result
committed without regenerating the page fails here), and a new result's points reach the page."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

from fixtures import REPO


@pytest.fixture(scope="module")
def perf_page():
    spec = importlib.util.spec_from_file_location("perf_page", REPO / "benchmarks" / "perf_page.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_committed_page_is_what_the_committed_results_give(perf_page):
    assert (REPO / "docs" / "performance.md").read_text() == perf_page.render(), (
        "docs/performance.md is stale: run python benchmarks/perf_page.py"
    )
    assert perf_page.main(["--check"]) == 0


def test_a_new_result_reaches_the_page_and_the_old_page_fails_the_check(perf_page, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(REPO / "benchmarks" / "results", results)
    before = perf_page.render(results)
    raw = {
        "points": {
            "c8_isl64_osl64": {
                "output_tok_per_s": 4321.0,
                "ttft_ms_p50": 3.0,
                "itl_ms_p50": 1.5,
                "roofline": {"limit_tok_per_s": 8642.0},
            }
        }
    }
    rec = perf_page.results_schema.record(
        "engine", "async", "NVIDIA B200", "2027-01-02T03:04:05+00:00", {"git_sha": "abc123"}, raw
    )
    (results / "NVIDIA-B200").mkdir()
    (results / "NVIDIA-B200" / "2027-01-02-engine-async.json").write_text(json.dumps(rec))
    after = perf_page.render(results)
    assert after != before
    assert "## NVIDIA B200" in after and "commit abc123" in after
    assert "| c8_isl64_osl64 | 4,321 | 8,642 | 50% | 3.00 | 1.500 |  |" in after
    # a figure without a column of its own, and a kind without a table of its own, are shown too
    point = {"figures": {"ratio": 0.5851}, "roofline": {}, "share_of_roofline": None}
    tools = {**rec, "name": "tools", "points": [{"name": "required_vs_none", **point}]}
    (results / "NVIDIA-B200" / "2027-01-02-engine-tools.json").write_text(json.dumps(tools))
    point["figures"] = {"ratio": 0.9564}
    store = {**rec, "kind": "store", "name": "sqlite", "detail": {}}
    store["points"] = [{"name": "c64_store_on_off", **point}]
    (results / "NVIDIA-B200" / "2027-01-02-store.json").write_text(json.dumps(store))
    after = perf_page.render(results)
    assert "| required_vs_none | - | - | - | - | - | ratio 0.5851 |" in after
    assert (
        "### Store: sqlite, 2027-01-02" in after and "| c64_store_on_off | ratio 0.9564 |" in after
    )
    page = tmp_path / "performance.md"
    page.write_text(before)
    perf_page.RESULTS = results
    try:
        assert perf_page.main(["--check", "--out", str(page)]) == 1
    finally:
        perf_page.RESULTS = REPO / "benchmarks" / "results"


def test_a_result_not_in_the_schema_is_named(perf_page, tmp_path):
    (tmp_path / "NVIDIA-H200").mkdir()
    (tmp_path / "NVIDIA-H200" / "2027-01-01-old.json").write_text(
        json.dumps({"gpu": "NVIDIA H200"})
    )
    with pytest.raises(ValueError, match="2027-01-01-old.json: not a qualflow-bench/1 result"):
        perf_page.render(tmp_path)
