"""Pinned AIPerf runs: build the exact `aiperf profile` command from a workload point, run it with a
fixed environment, and read/judge its export files (success is judged from the exports, never from
the exit code; see shared/reference/aiperf-0.13.md §4)."""
