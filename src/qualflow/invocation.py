"""The command line this process runs as, recorded by every stage into its outputs (pin.json,
the bundle manifest, correctness metadata, session.json), so `runs.commands` holds exactly what ran.
A leaf module: it imports nothing from qualflow."""

from __future__ import annotations

import shlex
import sys

_ARGV: list[str] | None = None


def set_argv(argv: list[str]) -> None:
    """Called by the CLI with the arguments it parses (tests call stages with their own argv)."""
    global _ARGV
    _ARGV = list(argv)


def current_command() -> str:
    """`qualflow <stage> <args>` as a shell-quoted line: the argv given to the CLI, else this
    process's own."""
    argv = _ARGV if _ARGV is not None else sys.argv[1:]
    return shlex.join(["qualflow", *argv])
