"""`qualflow chaos`: the schedule printed, the workflow copy prepared (one plain qualify: the
bundle, correctness, a first verdict), then each cycle (cycle.run_cycle) with its row of the
table; the table also as JSON (<work>/chaos.json, a CycleRecord per cycle). Exit status 1 if any
check failed."""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from qualflow.configs import from_args

from .checks import Verdict
from .config import ChaosConfig
from .cycle import Workflow, run_cycle, run_snakemake
from .faults import unmount
from .schedule import FAULT_KINDS, CyclePlan, make_schedule

WORKFLOW_FILES = ("workflow", "config", "workloads")
CONFIG_NAME = "chaos-cycle.yaml"


@dataclass(frozen=True)
class CycleRecord:
    seed: int
    cycle: int
    planned: str  # the schedule's faults and moments
    injected: tuple[str, ...]  # what each fault did
    cycle_rc: int | None  # the faulted snakemake's exit status
    cycle_s: float  # the faulted run's wall time
    rerun_s: float  # the plain rerun's
    verdicts: tuple[Verdict, ...]  # after the fault, then after the plain rerun
    ok: bool


def schedule_of(cfg: ChaosConfig) -> tuple[CyclePlan, ...]:
    kinds = tuple(k.strip() for k in cfg.faults.split(",") if k.strip()) or FAULT_KINDS
    return make_schedule(cfg.seed, cfg.cycles, cfg.window_s, kinds)


def workflow_copy(cfg: ChaosConfig, repo: Path) -> Workflow:
    """The workflow copy under <work>/wf (made once, kept between runs) with the cycle config."""
    if not (repo / "workflow" / "Snakefile").exists():
        raise FileNotFoundError(f"{repo}/workflow/Snakefile: run `qualflow chaos` from the repo")
    config = yaml.safe_load(Path(cfg.configfile).read_text())
    key = config.get("software_key")
    if not key:
        raise ValueError(f"{cfg.configfile}: software_key: required (the cycles' evidence key)")
    wf = Path(cfg.work) / "wf"
    for name in WORKFLOW_FILES:
        if not (wf / name).exists():
            (shutil.copytree if (repo / name).is_dir() else shutil.copy)(repo / name, wf / name)
    target = wf / CONFIG_NAME
    if not target.exists() or target.read_text() != Path(cfg.configfile).read_text():
        shutil.copy(cfg.configfile, target)
    pairs = [(m, p) for m, spec in config["models"].items() for p in spec["profiles"]]
    for mount in _mounts_under(wf):  # an earlier run that died with its tmpfs mounted
        unmount(mount)
    return Workflow(
        wf=wf,
        configfile=CONFIG_NAME,
        sessions=tuple(Path(f"results/session/{key}/{m}/{p}") for m, p in pairs),
        evidence=tuple(Path(f"results/evidence/{key}/{m}/{p}") for m, p in pairs),
        status=Path(f"results/status/{key}.tsv"),
    )


def _mounts_under(wf: Path) -> list[Path]:
    root = str(wf.resolve())
    lines = Path("/proc/mounts").read_text().splitlines() if Path("/proc/mounts").exists() else []
    return [Path(f.split()[1]) for f in lines if f.split()[1].startswith(root + "/")]


def row(r: CycleRecord) -> str:
    bad = [f"{v.name}: {v.detail}" for v in r.verdicts if not v.ok]
    verdict = "PASS" if r.ok else "FAIL " + " | ".join(bad)
    line = f"{r.seed:>6} {r.cycle:>5}  {r.planned:<48} {str(r.cycle_rc):>4}  {verdict}"
    return line + "".join(f"\n{'':>14}{what}" for what in r.injected)


def record_of(cfg: ChaosConfig, plan: CyclePlan, got: dict) -> CycleRecord:
    verdicts = tuple(
        dataclasses.replace(v, name=f"{when}: {v.name}")
        for when, vs in (("fault", got["after_fault"]), ("rerun", got["after_rerun"]))
        for v in vs
    )
    return CycleRecord(
        seed=cfg.seed,
        cycle=plan.cycle,
        planned=plan.label(),
        injected=tuple(got["faults"] + got["notes"]),
        cycle_rc=got["cycle_rc"],
        cycle_s=got["cycle_s"],
        rerun_s=got["rerun_s"],
        verdicts=verdicts,
        ok=all(v.ok for v in verdicts),
    )


def main_chaos(a) -> int:
    cfg = from_args(ChaosConfig, a)
    plans = schedule_of(cfg)
    same = plans == schedule_of(cfg)  # the schedule depends on the seed alone
    print(f"chaos: seed {cfg.seed}, {cfg.cycles} cycles; schedule (same seed, same schedule):")
    for plan in plans:
        print(f"  cycle {plan.cycle}: {plan.label()}", flush=True)
    if cfg.dry_run:
        return 0
    wfl = workflow_copy(cfg, Path.cwd())
    work = Path(cfg.work)
    prep = run_snakemake(
        wfl, wfl.qualify(cfg.cores), work / "prepare", "qualify", cfg.cycle_timeout_s
    )
    if prep.returncode != 0:  # an earlier run's failed session stands: measure it again
        prep = run_snakemake(wfl, wfl.qualify(cfg.cores, "--forcerun", "aiperf_profile"),
                             work / "prepare", "forced", cfg.cycle_timeout_s)  # fmt: skip
    if prep.returncode != 0:
        print(f"chaos: the qualify before the cycles failed: {work}/prepare/")
        return 1
    print(f"{'seed':>6} {'cycle':>5}  {'faults (planned)':<48} {'rc':>4}  verdicts")
    records: list[CycleRecord] = []
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # a TERM unwinds like a Ctrl-C
    try:
        for plan in plans:
            folder = work / "cycles" / f"{plan.cycle:03d}"
            got = run_cycle(wfl, plan, folder, cfg.cores, cfg.cycle_timeout_s, cfg.tmpfs_size)
            records.append(record_of(cfg, plan, got))
            print(row(records[-1]), flush=True)
            _write(work, cfg, plans, same, records)
    finally:  # interrupted mid-cycle: no tmpfs of a disk-full fault stays mounted
        signal.signal(signal.SIGTERM, previous)
        for mount in _mounts_under(wfl.wf):
            unmount(mount)
    n_ok = sum(r.ok for r in records)
    print(f"chaos: {n_ok}/{len(records)} cycles passed every check; table: {work}/chaos.json")
    return 0 if same and n_ok == len(records) else 1


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _write(work: Path, cfg: ChaosConfig, plans, same: bool, records: list[CycleRecord]) -> None:
    doc = {
        "config": asdict(cfg),
        "schedule": [p.as_dict() for p in plans],
        "same_seed_same_schedule": same,
        "cycles": [asdict(r) for r in records],
    }
    (work / "chaos.json").write_text(json.dumps(doc, indent=1))
