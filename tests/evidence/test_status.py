"""The qualification ladder's verdict for one run (qualflow.evidence.status)."""

from __future__ import annotations

import pandas as pd

from qualflow.evidence.status import StatusInputs, qualification_status


def _inputs() -> StatusInputs:
    corr = pd.DataFrame({"passed": [True], "thresholds_version": ["v1"]})
    protocol = pd.DataFrame({"name": ["stream"], "passed": [True]})
    return StatusInputs(
        implemented=True,
        correctness=corr,
        protocol=protocol,
        protocol_enabled=True,
        aiperf_ok=True,
        aiperf_reasons=[],
        accounting_ok=True,
        accounting_reasons=[],
    )


def test_the_reasons_returned_are_the_callers_own():
    """The join appends its notes (a failure, 'server timing unavailable') to the reasons of each
    repeat of a point; the SLO rung is shared by every repeat, so the list returned must be a copy,
    or repeat k carries each note k times."""
    slo = (False, ["ttft p99 over its bound"])
    status, first = qualification_status(_inputs(), slo=slo)
    assert status == "aiperf-qualified" and first == ["ttft p99 over its bound"]
    first.append("a note of the caller")
    _, second = qualification_status(_inputs(), slo=slo)
    assert second == ["ttft p99 over its bound"]
    assert slo[1] == ["ttft p99 over its bound"]
