"""The session's signal handling: SIGTERM, SIGINT and SIGHUP each raise `SessionInterrupted` once
(so that `finally` blocks stop the server), and the session dies with its parent (Snakemake's job
thread). `RECEIVED` keeps the signal, whatever the exception became."""

from __future__ import annotations

import signal

from qualflow.lifetime import die_with_parent


class SessionInterrupted(BaseException):
    """Raised from a signal handler so that `finally` blocks stop the server."""


# set by the handler, whatever the exception became
RECEIVED: dict[str, str | None] = {"signal": None}


def install_signal_handlers() -> None:
    RECEIVED["signal"] = None

    def handler(signum, frame):
        # once only: a terminal Ctrl-C reaches the session both from the terminal and passed on
        # by Snakemake
        if RECEIVED["signal"] is not None:
            return
        RECEIVED["signal"] = signal.Signals(signum).name
        raise SessionInterrupted(f"received {signal.Signals(signum).name}")

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, handler)
    # die (cleanly, via the handler) if our parent - Snakemake's job thread - dies
    die_with_parent()


def raise_if_interrupted() -> None:
    """Raise `SessionInterrupted` again where a signal arrived and its exception was swallowed on
    the way: by a broad `except` that records failures (a protocol check), or by a library that
    wraps what it catches (pydantic, building a schema when the signal came, raises a
    `SchemaError` instead). Without it, an interrupted session could end as if completed, with
    a failed check, and a plain rerun would not serve it again."""
    if RECEIVED["signal"] is not None:
        raise SessionInterrupted(f"received {RECEIVED['signal']}")


def restore_signal_handlers() -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
