"""Qualification status ladder: planned -> implemented -> family-validated -> aiperf-qualified."""
from __future__ import annotations

import pandas as pd

from qualflow.evidence.schema import STATUS_LADDER


def accounting_ok(s: dict) -> tuple[bool, list[str]]:
    """Every profiling request accounted for on both sides, no errors."""
    reasons = []
    n = s["request_count"]
    if not (s["n_client"] == s["n_server"] == s["n_matched"] == n):
        reasons.append(f"accounting: AIPerf records {s['n_client']}, server records {s['n_server']}, "
                       f"matched {s['n_matched']}, expected {n}")
    if s["n_client_only"]:
        reasons.append(f"{s['n_client_only']} client-only requests")
    if s["n_server_only"]:
        reasons.append(f"{s['n_server_only']} server-only requests")
    if s.get("n_server_osl_mismatch"):
        reasons.append(f"{s['n_server_osl_mismatch']} requests where the server did not generate exactly "
                       f"osl={s.get('osl')} tokens (max_output_tokens/ignore_eos not honoured)")
    if s["n_errors"]:
        reasons.append(f"{s['n_errors']} requests with errors")
    return not reasons, reasons


def correctness_ok(corr: pd.DataFrame, expected_thresholds_version: str | None = None) -> tuple[bool, list[str]]:
    if corr is None or len(corr) == 0:
        return False, ["no family correctness results"]
    reasons = []
    failed = corr[~corr["passed"].astype(bool)]
    if len(failed):
        reasons.append(f"{len(failed)} of {len(corr)} correctness cases failed "
                       f"(e.g. {failed.iloc[0]['case_id']}/{failed.iloc[0]['criterion']})")
    versions = set(corr["thresholds_version"].dropna().astype(str))
    if len(versions) != 1:
        reasons.append(f"correctness thresholds_version not unique: {sorted(versions)}")
    elif expected_thresholds_version is not None and versions != {str(expected_thresholds_version)}:
        reasons.append(f"thresholds changed: applied {versions.pop()}, expected {expected_thresholds_version}")
    return not reasons, reasons


def qualification_status(*, implemented: bool, correctness: pd.DataFrame, aiperf_ok: bool,
                         aiperf_reasons: list[str], accounting_ok: bool, accounting_reasons: list[str],
                         expected_thresholds_version: str | None = None) -> tuple[str, list[str]]:
    """The highest status whose conditions (and all below it) hold, with the reasons the next one
    was not reached."""
    if not implemented:
        return STATUS_LADDER[0], ["bundle not built or Task/server did not load"]
    ok, reasons = correctness_ok(correctness, expected_thresholds_version)
    if not ok:
        return STATUS_LADDER[1], reasons
    reasons = ([] if aiperf_ok else list(aiperf_reasons)) + ([] if accounting_ok else list(accounting_reasons))
    if reasons:
        return STATUS_LADDER[2], reasons
    return STATUS_LADDER[3], []

