"""The report page and the status command over evidence built from hand-made session files."""

from __future__ import annotations

from types import SimpleNamespace

from fixtures.sessions import build_joined
from qualflow.report.page import main_status, write_report


def test_report_page_and_figures(tmp_path):
    build_joined(tmp_path)
    res = write_report([tmp_path / "ev"], tmp_path / "rep")
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "aiperf-qualified" in html and "Protocol checks" in html and "2 of 2 passed" in html
    assert "Client vs server timing" in html and "public_task_call_wall" in html
    for f in (
        "dist_client_ttft_ms.png",
        "dist_client_itl_ms.png",
        "dist_client_request_latency_ms.png",
        "client_vs_server.png",
        "throughput_vs_concurrency.png",
    ):
        assert (tmp_path / "rep" / f).stat().st_size > 1000, f
        assert f in html and f in res["figures"]
    assert "aiperf-qualified" in (tmp_path / "rep" / "status.tsv").read_text()


def test_status_require(tmp_path, capsys):
    build_joined(tmp_path, drop_server=("p0",))
    args = SimpleNamespace(
        evidence=[str(tmp_path / "ev")], out=str(tmp_path / "s.tsv"), require="aiperf-qualified"
    )
    assert main_status(args) == 1
    assert "below aiperf-qualified" in capsys.readouterr().out
    args.require = "family-validated"
    assert main_status(args) == 0


def test_report_shows_a_failed_rung_and_why(tmp_path):
    build_joined(tmp_path, protocol_ok=False)
    write_report([tmp_path / "ev"], tmp_path / "rep")
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "1 of 2 passed" in html and "1 of 2 protocol checks failed (reject_x)" in html
    status = (tmp_path / "rep" / "status.tsv").read_text()
    assert "family-validated" in status and "aiperf-qualified" not in status
