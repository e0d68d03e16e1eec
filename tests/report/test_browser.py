"""The run report and the compare page in a real headless browser (Debian `chromium`): they load
offline, with no JavaScript error and no broken image, and render to PNG. A page with a JS error and
a broken image fails the same check."""

from __future__ import annotations

import pytest

from fixtures.compare_runs import write_run
from fixtures.sessions import build_joined
from qualflow.evidence.compare.config import CompareOptions
from qualflow.report.browser import check_page, find_chromium
from qualflow.report.compare import run_compare
from qualflow.report.page import write_report

pytestmark = pytest.mark.skipif(
    find_chromium() is None,
    reason="chromium not installed (.ci/run installs it: apt-get install -y chromium)",
)


def test_run_report_loads_with_every_image(tmp_path):
    build_joined(tmp_path)
    write_report([tmp_path / "ev"], tmp_path / "rep")
    res = check_page(tmp_path / "rep" / "report.html", tmp_path / "shots" / "report.png")
    assert res["ok"], res["errors"]
    assert res["images"] >= 4 and res["images_ok"] == res["images"]
    assert (tmp_path / "shots" / "report.png").stat().st_size > 10_000
    html = (tmp_path / "rep" / "report.html").read_text()
    assert (
        "Status ladder" in html and "Evidence tables" in html and "data:image/png;base64," in html
    )


def test_compare_page_loads_with_every_image(tmp_path):
    write_run(tmp_path / "ev", "v1", "m.fp16.A", seed=1)
    write_run(tmp_path / "ev", "v2", "m.fp16.B", seed=2, median=150.0)
    run_compare(
        "v1", "v2", root=tmp_path / "ev", out=tmp_path / "cmp", opts=CompareOptions(resamples=200)
    )
    res = check_page(tmp_path / "cmp" / "compare.html", tmp_path / "shots" / "compare.png")
    assert res["ok"], res["errors"]
    assert res["images"] == 2 and res["images_ok"] == 2
    assert (tmp_path / "shots" / "compare.png").stat().st_size > 10_000


def test_js_error_and_broken_image_fail_the_check(tmp_path):
    p = tmp_path / "bad.html"
    p.write_text(
        "<!doctype html><html><head><title>x</title></head><body><img alt='gone' src='missing.png'>"
        "<script>noSuchFunction()</script></body></html>"
    )
    res = check_page(p)
    assert not res["ok"]
    assert any(e.startswith("js ") and "noSuchFunction" in e for e in res["errors"]), res["errors"]
    assert any(e.startswith("broken image gone") for e in res["errors"]), res["errors"]
    assert not list(tmp_path.glob(".*browsercheck*"))  # the probe copy is removed
