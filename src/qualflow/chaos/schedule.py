"""The fault schedule: from a seed alone (random.Random(seed)), so the same seed gives the same
schedule, whatever the machine or the cycles' outcomes. Each cycle gets one or two faults, each a
kind, a signal where it is one, and a moment: seconds after its target appears in the cycle (the
process, the store's database file) or, for the full disk, after the cycle starts."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

# processes of the cycle's tree that a fault may signal (procs.role names them)
PROCESS_TARGETS = ("server", "engine", "aiperf-worker", "session", "snakemake")
SIGNALS = ("SIGKILL", "SIGTERM")
DISK_FULL = "disk-full"  # the session's results on a small tmpfs, filled at the moment
STORE_LOCK = "store-lock"  # the store's SQLite file held in an exclusive transaction from outside
FAULT_KINDS = (*(f"signal:{t}" for t in PROCESS_TARGETS), DISK_FULL, STORE_LOCK)


@dataclass(frozen=True)
class Fault:
    kind: str  # one of FAULT_KINDS
    signal: str | None  # SIGKILL or SIGTERM for a signal fault, else None
    at_s: float  # seconds after the target appears (disk-full: after the cycle starts)
    hold_s: float = 0.0  # store-lock: how long the lock is held

    @property
    def target(self) -> str | None:
        """The process role a signal fault hits (None for the others)."""
        return self.kind.split(":", 1)[1] if self.kind.startswith("signal:") else None

    def label(self) -> str:
        what = f"{self.signal} {self.target}" if self.target else self.kind
        held = f" for {self.hold_s:.1f}s" if self.kind == STORE_LOCK else ""
        return f"{what} @+{self.at_s:.1f}s{held}"


@dataclass(frozen=True)
class CyclePlan:
    cycle: int  # 1-based
    faults: tuple[Fault, ...]

    def label(self) -> str:
        return "; ".join(f.label() for f in self.faults)

    def as_dict(self) -> dict:
        return {"cycle": self.cycle, "faults": [asdict(f) for f in self.faults]}


def _fault(rng: random.Random, kind: str, window_s: float) -> Fault:
    sig = rng.choice(SIGNALS) if kind.startswith("signal:") else None
    at = round(rng.uniform(0.0, window_s), 1)
    hold = round(rng.uniform(1.0, 10.0), 1) if kind == STORE_LOCK else 0.0
    return Fault(kind=kind, signal=sig, at_s=at, hold_s=hold)


def make_schedule(
    seed: int, cycles: int, window_s: float, kinds: tuple[str, ...] = FAULT_KINDS
) -> tuple[CyclePlan, ...]:
    """`cycles` plans drawn from `random.Random(seed)`: one or two distinct fault kinds of `kinds`
    per cycle, each at a moment in [0, window_s]."""
    unknown = sorted(set(kinds) - set(FAULT_KINDS))
    if unknown or not kinds:
        raise ValueError(f"--faults: unknown fault kinds {unknown}; known: {list(FAULT_KINDS)}")
    rng = random.Random(seed)
    plans = []
    for c in range(1, cycles + 1):
        n = min(rng.choice((1, 2)), len(kinds))
        chosen = rng.sample(sorted(kinds), n)
        plans.append(CyclePlan(c, tuple(_fault(rng, k, window_s) for k in chosen)))
    return tuple(plans)
