"""A cycle's record: not ok when any check failed, whether after the fault or after the rerun; its
table row names the failed checks and what each fault did; the dry run prints the schedule only."""

from __future__ import annotations

from qualflow.chaos.checks import Verdict
from qualflow.chaos.config import ChaosConfig
from qualflow.chaos.run import record_of, row, schedule_of
from qualflow.cli import main


def got(after_fault, after_rerun):
    return dict(faults=["SIGKILL to server pid 7 at 3.0s"], notes=[], cycle_rc=1, cycle_s=4.0,
                rerun_s=30.0, after_fault=after_fault, after_rerun=after_rerun)  # fmt: skip


def test_a_failed_check_fails_the_cycle_and_its_row_names_it():
    cfg = ChaosConfig(seed=3)
    plan = schedule_of(cfg)[0]
    good = record_of(cfg, plan, got([Verdict("no lock", True)], [Verdict("no lock", True)]))
    assert good.ok and "PASS" in row(good)
    bad = record_of(cfg, plan, got([Verdict("no lock", False, "snakemake locks")], []))
    assert not bad.ok
    assert "fault: no lock: snakemake locks" in row(bad) and "pid 7" in row(bad)


def test_the_dry_run_prints_the_seeds_schedule(capsys, tmp_path):
    work = tmp_path / "work"
    assert main(["chaos", "--cycles", "4", "--seed", "9", "--work", str(work), "--dry-run"]) == 0
    out = capsys.readouterr().out
    for plan in schedule_of(ChaosConfig(cycles=4, seed=9)):
        assert f"cycle {plan.cycle}: {plan.label()}" in out
    assert not work.exists()  # nothing run


def test_a_chaos_run_interrupted_mid_cycle_leaves_no_tmpfs_mounted(tmp_path, monkeypatch):
    """A disk-full fault's tmpfs is mounted in the workflow copy; a chaos run stopped (Ctrl-C or
    TERM) in the middle of that cycle unmounts it on its way out. The qualify runs are replaced
    (what is under test is the run's own cleanup); the mount is real, where it can be made."""
    import pytest

    from qualflow.chaos import run as chaos_run
    from qualflow.chaos.cycle import Phase
    from qualflow.chaos.faults import mount_tmpfs, unmount

    work = tmp_path / "work"
    mounted = []

    def cycle(wfl, plan, folder, *rest):
        why = mount_tmpfs(wfl.wf / wfl.sessions[0], "1m")
        if why:
            pytest.skip(f"no tmpfs here: {why}")
        mounted.append(wfl.wf / wfl.sessions[0])
        raise KeyboardInterrupt  # Ctrl-C, or the TERM the run turns into one

    monkeypatch.setattr(chaos_run, "run_snakemake", lambda *a, **k: Phase(returncode=0))
    monkeypatch.setattr(chaos_run, "run_cycle", cycle)
    try:
        with pytest.raises(KeyboardInterrupt):
            main(["chaos", "--cycles", "1", "--work", str(work)])
        assert mounted and not chaos_run._mounts_under(work / "wf")
    finally:  # without the run's cleanup, the test's own
        for m in chaos_run._mounts_under(work / "wf"):
            unmount(m)
