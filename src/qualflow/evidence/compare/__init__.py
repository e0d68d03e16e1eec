"""Two runs' (or software versions', or stacks') evidence side by side, with a verdict on whether
each delta is beyond run-to-run noise.

- `config`: CompareOptions, the settings of one comparison (the CLI flags come from it).
- `stats`: the statistics (BCa bootstrap per test, Benjamini-Hochberg over every test of the
  comparison, resamples scaled to the corrected level); pure functions over arrays.
- `noise`: comparability (a run's fingerprint at a point) and run-to-run noise (pools of comparable
  runs: same dataset, workload, server settings and status).
- `stacks`: cross-version or cross-stack, how points pair up, which rows carry a request's figures.
- `samples`: a point's per-request samples (matched profiling requests, warm-up excluded).
- `sides`: base and head as typed records (`Side`, and `PointSide` at one point).
- `pairs`: a compared point (`PointPair`) and its rows of the comparison tables.
- `protocol`: the protocol-check matrix, side by side (also the run report's, by stack).
- `provenance`: a run's provenance field by field.
- `method`: the method as the page states it.
- `comparison`: `compare_evidence`, the steps above over the evidence store, into a `Comparison`.

Import each name from the module that holds it; this package imports nothing, so that the CLI can
read `config` without loading pandas.
"""
