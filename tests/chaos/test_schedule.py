"""The fault schedule: seeded (the same seed gives the same schedule), one or two distinct known
fault kinds a cycle, moments within the window, and a clear error for an unknown kind."""

from __future__ import annotations

import pytest

from qualflow.chaos.config import ChaosConfig
from qualflow.chaos.run import schedule_of
from qualflow.chaos.schedule import FAULT_KINDS, SIGNALS, STORE_LOCK, make_schedule


def test_the_same_seed_gives_the_same_schedule():
    assert make_schedule(50, 40, 8.0) == make_schedule(50, 40, 8.0)
    assert make_schedule(50, 40, 8.0) != make_schedule(51, 40, 8.0)


def test_a_schedule_is_a_prefix_of_a_longer_one_of_the_same_seed():
    """Cycle k's faults do not depend on how many cycles follow."""
    assert make_schedule(7, 60, 8.0)[:10] == make_schedule(7, 10, 8.0)


def test_each_cycle_gets_one_or_two_distinct_known_faults_within_the_window():
    plans = make_schedule(3, 200, 5.0)
    assert [p.cycle for p in plans] == list(range(1, 201))
    seen = set()
    for p in plans:
        kinds = [f.kind for f in p.faults]
        assert 1 <= len(kinds) <= 2 and len(set(kinds)) == len(kinds)
        for f in p.faults:
            assert f.kind in FAULT_KINDS and 0.0 <= f.at_s <= 5.0
            assert (f.signal in SIGNALS) == f.kind.startswith("signal:")
            assert (f.hold_s > 0) == (f.kind == STORE_LOCK)
        seen |= set(kinds)
    assert seen == set(FAULT_KINDS)  # 200 cycles draw every kind


def test_the_kinds_can_be_narrowed_and_an_unknown_one_is_named():
    cfg = ChaosConfig(cycles=20, seed=1, faults="signal:server,disk-full")
    assert {f.kind for p in schedule_of(cfg) for f in p.faults} <= {"signal:server", "disk-full"}
    with pytest.raises(ValueError, match="signal:nobody"):
        schedule_of(ChaosConfig(faults="signal:nobody"))
