"""A signal during a serving session always ends it as interrupted, even where its exception is
swallowed on the way: a protocol check records any exception as a failed check, and a library can
wrap what it catches (pydantic, building a schema when the signal came, raised a SchemaError). A
session that went on as if completed, with a failed check, was not served again by a plain rerun."""

from __future__ import annotations

import os
import signal
import time

import pytest

from qualflow.session import conformance
from qualflow.session.signals import (
    SessionInterrupted,
    install_signal_handlers,
    raise_if_interrupted,
    restore_signal_handlers,
)


@pytest.fixture
def handlers():
    install_signal_handlers()
    yield
    restore_signal_handlers()


def wrapped_interrupt(rid: str) -> str:
    """What the SDK did: the signal arrives inside a library that wraps the exception."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler raises before this ends
    except SessionInterrupted as e:
        raise ValueError(f"SchemaError: Error building serializer: {e}") from e
    return "not reached"


def test_a_wrapped_signal_in_a_protocol_check_interrupts_the_checks(handlers, monkeypatch):
    monkeypatch.setattr(
        conformance.Checker, "checks", lambda self: [("wrapped", wrapped_interrupt)]
    )
    with pytest.raises(SessionInterrupted, match="SIGINT"):
        conformance.run_protocol_checks("http://127.0.0.1:9", "m")


def test_without_a_signal_a_failing_check_is_only_a_failed_check(handlers, monkeypatch):
    def failing(rid):
        raise ValueError("a transport error")

    monkeypatch.setattr(conformance.Checker, "checks", lambda self: [("failing", failing)])
    (row,) = conformance.run_protocol_checks("http://127.0.0.1:9", "m")
    assert not row["passed"] and "a transport error" in row["detail"]
    raise_if_interrupted()  # nothing received: nothing raised
