"""The qualification status ladder, per model/profile/workload point. Each rung requires every rung
below it; the status is the highest rung whose conditions hold, with the reasons the next one was
not reached. This is the one place that decides a status.

- `planned`: configured. Nothing more is known (the bundle did not build, or the server never came
  up).
- `implemented`: the bundle builds and the server came up healthy with the Task loaded.
- `family-validated`: family correctness ran and every criterion passed, with the family's
  thresholds unchanged (one thresholds version, the expected one when the config names it).
- `protocol-conformant`: the Responses protocol checks ran and every one passed. With
  `protocol_checks: false` they did not run, so the status stops below this rung and says so.
- `aiperf-qualified`: the pinned AIPerf run is judged successful from its exports, every request is
  accounted for on both sides exactly once (no client-only, server-only or duplicated request ids),
  no request failed, and the client tools are the pinned versions (with `allow_unpinned_client` a
  mismatch is allowed but caps the status here, with the reason).
- `slo-met`: every repeat of the point is `aiperf-qualified` and every SLO of the point holds,
  judged on the mean over repeats (qualflow.evidence.slo); each miss is a reason naming the metric,
  the bound and the measured value, with its CI when repeats exist. A point without SLOs stops
  below.

For an external endpoint the rungs are the same, each defined for an endpoint: `implemented` =
reachable and `/v1/models` names the configured model; `family-validated` = endpoint correctness
(its greedy output through the API against the family reference on the pinned checkpoint) passed;
the protocol rung as for our server; `aiperf-qualified` accounted on the client side only (no server
timing records exist: every AIPerf record once, no errors, every stream's terminal event checked);
`slo-met` judged on the same client figures as for our server, taken over its client-only rows
(qualflow.evidence.samples). An SLO on a server-side figure (`task_call_wall_ms`) is not measured
there, so it is missed.

Evidence whose sources changed since the join (qualflow.evidence.freshness: the session rerun, the
bundle edited or rebuilt) is stale: every point reads `planned`, the stale reasons first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from qualflow.evidence.schema import STATUS_LADDER


@dataclass
class Rung:
    """The outcome of one rung's conditions: `ok`, or the reasons it is not reached."""

    ok: bool
    reasons: list[str] = field(default_factory=list)


def accounting_ok(s: dict, server_timing: bool = True) -> tuple[bool, list[str]]:
    """Every profiling request accounted for on both sides exactly once, no errors. Without server
    timing (an external endpoint) on the client side only: every AIPerf record present exactly once,
    client-only by design, no errors (a stream whose terminal event is missing or failed is one)."""
    reasons = []
    n = s["request_count"]
    if not server_timing:
        if s["n_client"] != n:
            reasons.append(
                f"accounting (client side): AIPerf records {s['n_client']}, expected {n}"
            )
    elif not (s["n_client"] == s["n_server"] == s["n_matched"] == n):
        reasons.append(
            f"accounting: AIPerf records {s['n_client']}, server records {s['n_server']}, "
            f"matched {s['n_matched']}, expected {n}"
        )
    if s["n_client_only"] and server_timing:
        reasons.append(f"{s['n_client_only']} client-only requests")
    if s["n_server_only"]:
        reasons.append(f"{s['n_server_only']} server-only requests")
    if s.get("duplicate_request_ids"):
        reasons.append(
            f"duplicated request ids (more than one record on a side): {s['duplicate_request_ids']}"
        )
    if s.get("n_server_osl_mismatch"):
        reasons.append(
            f"{s['n_server_osl_mismatch']} requests where the server did not generate exactly "
            f"osl={s.get('osl')} tokens (max_output_tokens/ignore_eos not honoured)"
        )
    if s["n_errors"]:
        reasons.append(f"{s['n_errors']} requests with errors")
    return not reasons, reasons


def correctness_ok(
    corr: pd.DataFrame, expected_thresholds_version: str | None = None
) -> tuple[bool, list[str]]:
    if corr is None or len(corr) == 0:
        return False, ["no family correctness results"]
    reasons = []
    failed = corr[~corr["passed"].astype(bool)]
    if len(failed):
        reasons.append(
            f"{len(failed)} of {len(corr)} correctness cases failed "
            f"(e.g. {failed.iloc[0]['case_id']}/{failed.iloc[0]['criterion']}"
            + (
                f": {failed.iloc[0]['detail']}"
                if "detail" in failed and failed.iloc[0]["detail"]
                else ""
            )
            + ")"
        )
    versions = set(corr["thresholds_version"].dropna().astype(str))
    if len(versions) != 1:
        reasons.append(f"correctness thresholds_version not unique: {sorted(versions)}")
    elif expected_thresholds_version is not None and versions != {str(expected_thresholds_version)}:
        reasons.append(
            f"thresholds changed: applied {versions.pop()}, expected {expected_thresholds_version}"
        )
    return not reasons, reasons


def protocol_ok(protocol: pd.DataFrame | None, enabled: bool) -> tuple[bool, list[str]]:
    if not enabled:
        return False, ["protocol checks disabled (protocol_checks: false): conformance not shown"]
    if protocol is None or len(protocol) == 0:
        return False, ["no protocol check results (the checks did not run)"]
    failed = protocol[~protocol["passed"].astype(bool)]
    if len(failed):
        names = ", ".join(failed["name"].astype(str).head(5))
        return False, [f"{len(failed)} of {len(protocol)} protocol checks failed ({names})"]
    return True, []


NO_SLO = "no SLOs configured for this workload point (workloads.<name>.slo)"


def slo_ok(
    configured: bool, misses: list[str], repeats_below: list[str] | None = None
) -> tuple[bool, list[str]]:
    """The `slo-met` rung: SLOs configured, every repeat qualified (else they are not judged), no
    miss."""
    if not configured:
        return False, [NO_SLO]
    if repeats_below:
        return False, [f"SLOs not judged: {r}" for r in repeats_below]
    return not misses, list(misses)


@dataclass(frozen=True, eq=False)
class StatusInputs:
    """What the rungs below `slo-met` are judged on, for one run of a point.
    `client_pin_reasons`: allowed mismatches of the client tools' pinned versions; each caps the
    status below `aiperf-qualified`."""

    implemented: bool
    correctness: pd.DataFrame
    protocol: pd.DataFrame | None
    protocol_enabled: bool
    aiperf_ok: bool
    aiperf_reasons: list[str]
    accounting_ok: bool
    accounting_reasons: list[str]
    expected_thresholds_version: str | None = None
    implemented_reasons: list[str] | None = None
    client_pin_reasons: list[str] | None = None


def qualification_status(
    s: StatusInputs, slo: tuple[bool, list[str]] | None = None
) -> tuple[str, list[str]]:
    """The highest status whose conditions (and all below it) hold, with the reasons the next one
    was not reached. `slo`: the `slo-met` rung (`slo_ok`); None: no SLOs configured."""
    rungs = [
        Rung(
            s.implemented,
            list(s.implemented_reasons or []) or ["bundle not built or Task/server did not load"],
        ),
        Rung(*correctness_ok(s.correctness, s.expected_thresholds_version)),
        Rung(*protocol_ok(s.protocol, s.protocol_enabled)),
        Rung(
            s.aiperf_ok and s.accounting_ok and not s.client_pin_reasons,
            (
                []
                if s.aiperf_ok
                else list(s.aiperf_reasons) or ["the AIPerf run was not judged successful"]
            )
            + ([] if s.accounting_ok else list(s.accounting_reasons) or ["accounting failed"])
            + list(s.client_pin_reasons or []),
        ),
        Rung(*(slo or slo_ok(False, []))),
    ]
    assert len(rungs) == len(STATUS_LADDER) - 1
    for reached, rung in zip(STATUS_LADDER, rungs):
        if not rung.ok:
            return reached, list(rung.reasons)  # a copy: callers append their own notes
    return STATUS_LADDER[-1], []


def stale_status(runs: pd.DataFrame, reasons: list[str]) -> pd.DataFrame:
    """The `runs` rows of stale evidence (qualflow.evidence.freshness.stale_reasons): `planned`,
    nothing current being known, with the stale reasons before the recorded ones."""
    if not reasons or runs.empty:
        return runs
    out = runs.copy()
    was = out["status"].astype(str)
    out["status_reasons"] = [
        "; ".join(
            [*reasons, f"its verdict was {w}" + (f" ({r})" if isinstance(r, str) and r else "")]
        )
        for w, r in zip(was, out["status_reasons"])
    ]
    out["status"] = STATUS_LADDER[0]
    return out
