"""The settings of `qualflow chaos`: one frozen dataclass whose field defaults are the only defaults
and from which the command's flags are generated (qualflow.configs). Light at import."""

from __future__ import annotations

from dataclasses import dataclass

from qualflow.configs import setting


@dataclass(frozen=True)
class ChaosConfig:
    """N qualify cycles of `configfile` in a copy of the workflow under `work`, each with the
    faults the seeded schedule gives it, checked after it and rerun plainly."""

    cycles: int = setting(3, help="qualify cycles to run")
    seed: int = setting(0, help="the schedule's seed: the same seed gives the same faults")
    work: str = setting(
        "results/chaos",
        help="work folder: the workflow copy (<work>/wf), each cycle's logs and the table "
        "(<work>/chaos.json); kept between runs, so the bundle is built once",
    )
    configfile: str = setting(
        "config/chaos.yaml", help="the workflow config every cycle qualifies (copied into the work)"
    )
    faults: str = setting(
        "",
        help="comma-separated fault kinds to draw from (default: every kind; see "
        "qualflow.chaos.schedule.FAULT_KINDS)",
    )
    window_s: float = setting(
        60.0,
        help="a fault's moment: uniform in [0, window] seconds after its target appears (a "
        "session's startup, protocol checks and AIPerf point take about a minute on 2 cores)",
    )
    cycle_timeout_s: float = setting(
        600.0, help="a cycle's or a rerun's snakemake is stopped after this long"
    )
    cores: int = setting(2, help="snakemake --cores of every cycle")
    tmpfs_size: str = setting(
        "64m",
        help="disk-full: the size of the tmpfs the session's results are put on (filled at "
        "the fault's moment)",
    )
    dry_run: bool = setting(False, help="print the schedule and exit (nothing is run)")
