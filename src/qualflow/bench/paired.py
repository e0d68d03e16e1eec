"""The comparison math of the benchmarks that set two sides side by side in one call, alternated
(constrained requests against none, a shared batch against one without constrained rows, the
response store on against off): each round measures both sides, the figure is the median of the
rounds' ratios (a slow round slows both sides, so its ratio still holds), with their spread, and
whether it meets its target."""

from __future__ import annotations

import statistics


def ratios(base: list[float], test: list[float]) -> list[float]:
    """Per round, test / base (the rounds in order; both sides measured in each)."""
    if len(base) != len(test) or not base:
        raise ValueError(f"paired rounds must match and be some: {len(base)} vs {len(test)}")
    return [t / b for b, t in zip(base, test)]


def paired(base: list[float], test: list[float]) -> dict:
    """The median ratio test / base over the rounds, its min and max, and each side's median."""
    r = ratios(base, test)
    return {
        "ratio": statistics.median(r),
        "ratio_min": min(r),
        "ratio_max": max(r),
        "rounds": len(r),
        "base": statistics.median(base),
        "test": statistics.median(test),
    }


def slowdown_pct(base: list[float], test: list[float]) -> dict:
    """How much slower test is than base in %, from per-round times (ITL: larger is slower):
    100 * (median ratio - 1), with the spread of the rounds."""
    p = paired(base, test)
    return {
        "slower_pct": 100 * (p["ratio"] - 1),
        "slower_pct_min": 100 * (p["ratio_min"] - 1),
        "slower_pct_max": 100 * (p["ratio_max"] - 1),
        "rounds": p["rounds"],
        "base": p["base"],
        "test": p["test"],
    }


def added_ms(base_ms: list[float], test_ms: list[float]) -> dict:
    """What test adds to base's latency, pair by pair (each pair measured back to back): the
    median of the differences and their p90."""
    if len(base_ms) != len(test_ms) or not base_ms:
        raise ValueError(f"paired samples must match and be some: {len(base_ms)} vs {len(test_ms)}")
    d = sorted(t - b for b, t in zip(base_ms, test_ms))
    return {
        "added_ms_p50": statistics.median(d),
        "added_ms_p90": d[min(len(d) - 1, int(0.9 * len(d)))],
        "samples": len(d),
    }


def judged(figure: dict, key: str, at_least: float | None = None, at_most: float | None = None):
    """`figure` with its target and whether `figure[key]` meets it."""
    ok = (at_least is None or figure[key] >= at_least) and (
        at_most is None or figure[key] <= at_most
    )
    target = {"at_least": at_least} if at_least is not None else {"at_most": at_most}
    return {**figure, "target": {key: target}, "met": ok}
