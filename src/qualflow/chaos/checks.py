"""The checks after a cycle, each over what the cycle left on disk (and the processes it left), each
a Verdict: ok, or what is wrong. Pure functions of their inputs, so that each is tested on a crafted
bad case (tests/chaos/test_checks.py)."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from qualflow.evidence.schema import STATUS_LADDER

ACKED = ("completed", "incomplete")  # a response the client got a terminal event for


@dataclass(frozen=True)
class Verdict:
    name: str
    ok: bool
    detail: str = ""


def _read(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path) if path.exists() else pd.DataFrame()


def status_truthful(status: Path, evidence: Path, failed_run: bool = False) -> Verdict:
    """Every row of the status table claims no rung its evidence does not show: correctness all
    passed for `family-validated`, protocol checks all passed for `protocol-conformant`, every
    request accounted for on both sides with no error for `aiperf-qualified`. A row naming a run the
    evidence does not hold is a claim without evidence, unless the cycle failed (`failed_run`) and
    the table is older than the evidence: a table the failed run did not get to rewrite."""
    name = "status truthful"
    if not status.exists():
        return Verdict(name, True, "no status table")
    st = pd.read_csv(status, sep="\t")
    runs = _read(evidence / "runs.parquet")
    known = set(runs["run_id"]) if len(runs) else set()
    runs_file = evidence / "runs.parquet"
    if failed_run and set(st["run_id"]) - known:
        if not runs_file.exists() or status.stat().st_mtime <= runs_file.stat().st_mtime:
            return Verdict(name, True, "the table is an earlier run's (superseded)")
    corr, proto = _read(evidence / "correctness.parquet"), _read(evidence / "protocol.parquet")
    summ = _read(evidence / "summary.parquet")
    wrong = []
    for row in st.to_dict("records"):
        rung, run, point = STATUS_LADDER.index(row["status"]), row["run_id"], row["point_id"]
        if run not in known:
            wrong.append(f"{point}: {row['status']} for run {run}, which has no evidence")
            continue
        if rung >= STATUS_LADDER.index("family-validated") and not _all_passed(corr, run):
            wrong.append(f"{point}: {row['status']} without passed correctness")
        if rung >= STATUS_LADDER.index("protocol-conformant") and not _all_passed(proto, run):
            wrong.append(f"{point}: {row['status']} without passed protocol checks")
        if rung >= STATUS_LADDER.index("aiperf-qualified"):
            why = _accounting(summ, run, point)
            if why:
                wrong.append(f"{point}: {row['status']} but {why}")
    return Verdict(name, not wrong, "; ".join(wrong))


def _all_passed(table: pd.DataFrame, run: str) -> bool:
    rows = table[table["run_id"] == run] if len(table) else table
    return len(rows) > 0 and bool(rows["passed"].astype(bool).all())


def _accounting(summ: pd.DataFrame, run: str, point: str) -> str:
    """Why the point's requests are not all accounted for on both sides ('' when they are)."""
    rows = summ[(summ["run_id"] == run) & (summ["point_id"] == point)] if len(summ) else summ
    if not len(rows):
        return "no summary row"
    s = rows.iloc[0]
    n = int(s["request_count"])
    counts = {k: int(s[k]) for k in ("n_client", "n_server", "n_matched")}
    if set(counts.values()) != {n}:
        return f"requests {counts}, expected {n}"
    if int(s["n_errors"]):
        return f"{int(s['n_errors'])} requests with errors"
    return ""


def accounted(status: Path, evidence: Path) -> Verdict:
    """Every point's requests are accounted for on both sides, or its status row says why not
    (a rung below aiperf-qualified with reasons)."""
    name = "requests accounted"
    summ = _read(evidence / "summary.parquet")
    if not len(summ):
        return Verdict(name, True, "no evidence")
    st = pd.read_csv(status, sep="\t") if status.exists() else pd.DataFrame()
    wrong = []
    for s in summ.to_dict("records"):
        why = _accounting(summ, s["run_id"], s["point_id"])
        if not why:
            continue
        row = (
            st[(st["run_id"] == s["run_id"]) & (st["point_id"] == s["point_id"])] if len(st) else st
        )
        said = len(row) and str(row.iloc[0]["status_reasons"] or "").strip() not in ("", "nan")
        below = len(row) and STATUS_LADDER.index(row.iloc[0]["status"]) < STATUS_LADDER.index(
            "aiperf-qualified"
        )
        if not (said and below):
            wrong.append(f"{s['point_id']}: {why}, and the status does not say why")
    return Verdict(name, not wrong, "; ".join(wrong))


def acknowledged_stored(timing: Path, store: Path) -> Verdict:
    """Every response the server acknowledged as stored (a timing record of a completed or
    incomplete response with a store write) is in the store's database. The protocol checks'
    responses are left out: those checks delete some on purpose (a deleted response is a 404), and
    check their own retrieval."""
    name = "stored responses kept"
    if not timing.exists():
        return Verdict(name, True, "no timing records")
    acked = set()
    for line in timing.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line of a killed server
        stored = rec.get("status") in ACKED and rec.get("store_write_ns") is not None
        if stored and rec.get("tag") != "protocol":
            acked.add(rec["response_id"])
    if not acked:
        return Verdict(name, True, "no stored response acknowledged")
    if not store.exists():
        return Verdict(name, False, f"{len(acked)} acknowledged, and the store is gone")
    try:
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=30)
        try:
            ids = {r[0] for r in conn.execute("SELECT id FROM responses")}
        finally:
            conn.close()
    except sqlite3.Error as e:  # a check that cannot read the store fails, saying why
        return Verdict(name, False, f"{len(acked)} acknowledged, the store unreadable: {e}")
    lost = sorted(acked - ids)
    return Verdict(name, not lost, f"{len(lost)} of {len(acked)} lost: {lost[:3]}" if lost else "")


def no_locks(wf: Path, lock_dirs: tuple[Path, ...] = (), excused: str = "") -> Verdict:
    """No Snakemake lock in the workflow copy and no file in our lock folders (`excused`: why a
    Snakemake lock is expected, e.g. Snakemake itself was SIGKILLed)."""
    name = "no lock"
    smk = sorted(p.name for p in (wf / ".snakemake" / "locks").glob("*"))
    ours = sorted(str(p) for d in lock_dirs for p in (d.glob("*") if d.is_dir() else ()))
    if smk and excused and not ours:
        return Verdict(name, True, f"snakemake lock left ({excused})")
    bad = [f"snakemake locks {smk}"] * bool(smk) + [f"lock files {ours}"] * bool(ours)
    return Verdict(name, not bad, "; ".join(bad))


SNAKEMAKE_TMP = "snakemake"  # Snakemake's own temporary folder's prefix (its workflow's, in TMPDIR)


def no_leftovers(
    processes: list[str], ports: list[int], tmp: list[Path] | None, excused: str = ""
) -> Verdict:
    """No process of the cycle alive, no port of it held, nothing left in its temporary folders
    (`tmp`: each a folder that must be empty or absent; None: not checked). `excused`: why
    Snakemake's own temporary folder may be left (Snakemake was SIGKILLed: only its exit removes
    it, and no later run can tell a dead Snakemake's folder from a live one's); such folders are
    named in the verdict, and anything else left still fails it."""
    tmps = sorted(p for d in tmp or () if d.is_dir() for p in d.iterdir())
    tmps += sorted(d for d in tmp or () if d.name.startswith("qf-aiperf-") and d.exists())
    smk = [p for p in tmps if excused and p.name.startswith(SNAKEMAKE_TMP)]
    rest = [str(p) for p in tmps if p not in smk]
    bad = (
        [f"processes {processes}"] * bool(processes)
        + [f"ports held {ports}"] * bool(ports)
        + [f"temporary files {rest[:5]}"] * bool(rest)
    )
    if not bad and smk:
        return Verdict(
            "nothing left", True, f"snakemake's {[p.name for p in smk]} left ({excused})"
        )
    return Verdict("nothing left", not bad, "; ".join(bad))


def rerun_completed(returncode: int | None, log: str) -> Verdict:
    """The plain rerun completed: Snakemake exited 0, or the only job that failed is `verdict`:
    every job ran, and the status table holds a point below the required rung because the faulted
    session recorded its failure as evidence (a session that ran to its end is not rerun by a
    plain `qualify`; `-R aiperf_profile` measures again). The status check judges that table."""
    name = "plain rerun completes"
    if returncode == 0:
        return Verdict(name, True)
    failed = sorted(set(re.findall(r"^Error in rule (\w+):", log, re.M)))
    if failed == ["verdict"]:
        return Verdict(name, True, "every job ran; the verdict stands below the required rung")
    return Verdict(name, False, f"exit {returncode}, failed rules {failed or 'none named'}")
