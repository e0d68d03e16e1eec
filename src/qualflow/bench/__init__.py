"""The benchmarks (`qualflow bench ...`), above every other layer: nothing imports this package.

`task` (`qualflow bench task`: one point through the Task API), `engine` (`qualflow bench engine`:
Task-level points, the offline workload and each point's roofline, through a plan's engine
variants) and `server` (`qualflow bench server`: the Task, `qualflow serve` + AIPerf and the
harness ceiling side by side); `config` holds their settings, `results` the schema every result
is written in. Light at import: the CLI builds the flags from `config` and `task`."""
