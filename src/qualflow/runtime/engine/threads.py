"""Why a thread died: the exception that ended it, recorded by a chained `threading.excepthook`."""

from __future__ import annotations

import threading
import weakref

_deaths: weakref.WeakKeyDictionary[threading.Thread, str] = weakref.WeakKeyDictionary()
_previous = threading.excepthook


def _hook(args) -> None:
    if args.thread is not None:
        _deaths[args.thread] = f"{args.exc_type.__name__}: {args.exc_value}"
    _previous(args)


threading.excepthook = _hook


def thread_death(thread: threading.Thread) -> str | None:
    """The uncaught exception that ended `thread`, if it ended that way."""
    return _deaths.get(thread)
