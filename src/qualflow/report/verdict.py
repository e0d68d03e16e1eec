"""The verdict of a `qualify` run from its status table (status.tsv): the lines a terminal ends with
(each point's rung, output tok/s, TTFT p50, ITL p50 and why it went no further, then the report's
path), and whether every point reached the required rung.

Light at import (csv only, no pandas): the workflow prints the verdict from its `onsuccess` and
`onerror` hooks in Snakemake's own process, and the `qualify` rule checks it as a step of its own,
so that the status rule's job always succeeds at writing the table and Snakemake keeps it whatever
the outcome."""

from __future__ import annotations

import csv
from pathlib import Path

from qualflow.evidence.schema import STATUS_LADDER

COLUMNS = (
    ("point", "point"),
    ("rung", "status"),
    ("output tok/s", "output_tps"),
    ("TTFT p50 ms", "ttft_p50_ms"),
    ("ITL p50 ms", "itl_p50_ms"),
    ("why not further", "status_reasons"),
)
REASON_CHARS = 100
# beside report.html: the runs' identity in one line (report.identity); the verdict begins with it
IDENTITY_FILE = "identity.txt"


def read_status(path: str | Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _number(text: str | None) -> str:
    try:
        return f"{float(text):.4g}"
    except (TypeError, ValueError):
        return "-"


def _cells(row: dict[str, str]) -> list[str]:
    point = "/".join(x for x in (row.get("model"), row.get("profile"), row.get("point_id")) if x)
    reason = " ".join((row.get("status_reasons") or "").split()) or "-"
    if len(reason) > REASON_CHARS:
        reason = reason[: REASON_CHARS - 3] + "..."
    return [
        point,
        row.get("status") or "-",
        _number(row.get("output_tps")),
        _number(row.get("ttft_p50_ms")),
        _number(row.get("itl_p50_ms")),
        reason,
    ]


def verdict_lines(
    rows: list[dict[str, str]], *, report: str | None = None, compare: str | None = None
) -> list[str]:
    """The status table as aligned text, then the report's (and the compare page's) path."""
    table = [[title for title, _ in COLUMNS], *(_cells(r) for r in rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]
    if not rows:
        lines.append("(no points in the status table)")
    if report:
        lines.append(f"report: {report}")
    if compare:
        lines.append(f"compare: {compare}")
    return lines


def points_below(rows: list[dict[str, str]], require: str) -> list[dict[str, str]]:
    need = STATUS_LADDER.index(require)
    return [
        r
        for r in rows
        if r.get("status") not in STATUS_LADDER or STATUS_LADDER.index(r["status"]) < need
    ]


def check(status: str | Path, require: str) -> tuple[bool, str]:
    """Whether every point of the table reached `require` (an empty table does not), and the line
    that says so."""
    rows = read_status(status)
    low = points_below(rows, require)
    if not rows or low:
        return False, f"qualflow status: {len(low) if rows else 'no'} point(s) below {require}"
    return True, f"qualflow status: every point reached {require}"


def print_verdict(
    status: str | Path,
    *,
    report: str | None = None,
    compare: str | None = None,
    written_after: float | None = None,
    identity: str | None = None,
) -> None:
    """Print the verdict lines of `status` (nothing where there is no table), after the `identity`
    line where given; with `written_after` (a time.time(), after a failure), a table older than that
    is not this run's, and is named as such instead of being shown as its verdict."""
    path = Path(status)
    if written_after is not None and (not path.exists() or path.stat().st_mtime < written_after):
        print(
            f"qualflow: this run wrote no status table ({path}); see the failed jobs above",
            flush=True,
        )
        return
    if not path.exists():
        return
    first = [f"qualflow run: {identity}"] if identity else []
    lines = verdict_lines(read_status(path), report=report, compare=compare)
    print("\n".join([*first, "qualflow status:", *lines]), flush=True)


def show_verdict(
    status: str | Path,
    report_dir: str | Path,
    compare_dir: str | Path,
    failed_since: float | None = None,
) -> None:
    """How a workflow run ends (the Snakefile's onsuccess/onerror): the verdict of `status`, with
    the report's path and the compare page's where one was written. `failed_since`: the run's
    start, after a failure (only a table written since is this run's verdict)."""
    compare, ident = Path(compare_dir) / "compare.html", Path(report_dir) / IDENTITY_FILE
    fresh = ident.exists() and (failed_since is None or ident.stat().st_mtime >= failed_since)
    print_verdict(
        status,
        report=f"{report_dir}/report.html",
        compare=str(compare) if compare.exists() else None,
        written_after=failed_since,
        identity=ident.read_text().strip() if fresh else None,
    )


def add_verdict_args(s) -> None:
    s.add_argument("--status", required=True, help="the status table (status.tsv)")
    s.add_argument("--require", required=True, choices=STATUS_LADDER)
    s.add_argument(
        "--out", required=True, help="written (with the verdict line) only when it is met"
    )


def main_verdict(a) -> int:
    """`qualflow verdict`: exit 1 unless every point of the table reached --require."""
    rows = read_status(a.status)
    print("\n".join(verdict_lines(rows)), flush=True)
    ok, line = check(a.status, a.require)
    print(line, flush=True)
    if ok:
        Path(a.out).write_text(line + "\n")
    return 0 if ok else 1
