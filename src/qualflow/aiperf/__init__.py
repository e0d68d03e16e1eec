"""Pinned AIPerf runs: build the exact `aiperf profile` command from a workload point, run it with a
fixed environment, and read/judge its export files (success is judged from the exports, never from
the exit code; see shared/reference/aiperf-0.13.md §4)."""
from qualflow.aiperf.command import AiperfPoint, build_command, command_to_str  # noqa: F401
from qualflow.aiperf.exports import judge_run, read_records, read_summary  # noqa: F401
