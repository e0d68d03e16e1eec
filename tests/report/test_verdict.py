"""The verdict of a `qualify` run from its status table: the terminal's last lines (each point's
rung, output tok/s, TTFT p50, ITL p50 and why it went no further, one line each; the report's path),
and the check that fails the target unless every point reached the required rung, writing its
verdict file only then."""

from __future__ import annotations

import argparse
import csv
import os
import time

from qualflow.report.verdict import add_verdict_args, main_verdict, print_verdict, verdict_lines

FIELDS = [
    "software_key",
    "run_id",
    "model",
    "profile",
    "point_id",
    "stack",
    "status",
    "output_tps",
    "ttft_p50_ms",
    "itl_p50_ms",
    "status_reasons",
]


def write_status(path, *rows):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, FIELDS, delimiter="\t")
        w.writeheader()
        for r in rows:
            w.writerow({f: r.get(f, "") for f in FIELDS})
    return path


GOOD = {
    "model": "embedded",
    "profile": "fp16",
    "point_id": "tiny_c2",
    "status": "slo-met",
    "output_tps": "123.456",
    "ttft_p50_ms": "12.5",
    "itl_p50_ms": "3.25",
    "status_reasons": "",
}
LOW = {
    **GOOD,
    "point_id": "tiny_c8",
    "status": "aiperf-qualified",
    "ttft_p50_ms": "",
    "status_reasons": "slo: ttft_ms_p99 900 > 500\nserver log tail: " + "x" * 300,
}


def verdict(tmp_path, require, *rows):
    p = argparse.ArgumentParser()
    add_verdict_args(p)
    a = p.parse_args(
        [
            "--status",
            str(write_status(tmp_path / "s.tsv", *rows)),
            "--require",
            require,
            "--out",
            str(tmp_path / "s.verdict"),
        ]
    )
    return main_verdict(a)


def test_the_verdict_lines_show_each_point_and_the_report(tmp_path):
    lines = verdict_lines(
        [GOOD, LOW], report="results/report/k/report.html", compare="results/compare/x/compare.html"
    )
    assert lines[0].split() == [
        "point",
        "rung",
        "output",
        "tok/s",
        "TTFT",
        "p50",
        "ms",
        "ITL",
        "p50",
        "ms",
        "why",
        "not",
        "further",
    ]
    assert lines[1].split() == ["embedded/fp16/tiny_c2", "slo-met", "123.5", "12.5", "3.25", "-"]
    low = lines[2]
    assert low.startswith("embedded/fp16/tiny_c8  aiperf-qualified") and " - " in low  # no TTFT
    assert (
        "slo: ttft_ms_p99 900 > 500 server log tail:" in low
        and low.endswith("...")
        and len(low) < 200
    )
    assert lines[-2:] == [
        "report: results/report/k/report.html",
        "compare: results/compare/x/compare.html",
    ]


def test_the_check_fails_below_the_required_rung_and_writes_no_verdict(tmp_path, capsys):
    assert verdict(tmp_path, "slo-met", GOOD, LOW) == 1
    assert not (tmp_path / "s.verdict").exists()
    out = capsys.readouterr().out
    assert "qualflow status: 1 point(s) below slo-met" in out and "tiny_c8" in out
    assert verdict(tmp_path, "aiperf-qualified", GOOD, LOW) == 0
    assert (
        tmp_path / "s.verdict"
    ).read_text() == "qualflow status: every point reached aiperf-qualified\n"
    (tmp_path / "s.verdict").unlink()
    assert (
        verdict(tmp_path, "implemented") == 1 and not (tmp_path / "s.verdict").exists()
    )  # no points


def test_after_a_failure_only_this_runs_table_is_shown_as_its_verdict(tmp_path, capsys):
    status = write_status(tmp_path / "s.tsv", GOOD)
    old = time.time() - 60
    os.utime(status, (old, old))
    print_verdict(status, report="r.html", written_after=time.time() - 5)
    out = capsys.readouterr().out
    assert "this run wrote no status table" in out and "slo-met" not in out
    print_verdict(status, report="r.html", written_after=old - 5)
    out = capsys.readouterr().out
    assert "embedded/fp16/tiny_c2" in out and out.rstrip().endswith("report: r.html")
    print_verdict(
        tmp_path / "none.tsv", report="r.html"
    )  # success without a table: nothing to show
    assert capsys.readouterr().out == ""
