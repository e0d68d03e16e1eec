"""`qualflow chaos`: a seeded chaos run. N full qualify cycles of a small workflow config, each with
one or two faults injected at a seeded random moment into the processes the cycle started (found in
its own process tree), a full disk for its session results, or the response store locked mid-write;
after each cycle, checks that the status tells the truth, that nothing of ours is left, that every
request is accounted for, that no acknowledged stored response is lost, and that a plain rerun
completes. config.py (ChaosConfig, the flags), schedule.py (the seeded fault schedule), procs.py
(a cycle's process tree), faults.py (injecting one fault), checks.py (the checks), cycle.py (one
cycle), run.py (the run and its table)."""
