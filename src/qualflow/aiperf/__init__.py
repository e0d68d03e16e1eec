"""Pinned AIPerf runs: build the exact `aiperf profile` command from a workload point, run it with a
fixed environment, and read/judge its export files (success is judged from the exports, never from
the exit code: AIPerf 0.13 exits 0 after failed or cancelled requests)."""
