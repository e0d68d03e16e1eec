"""Compared points: base and head paired by point key, and each pair's rows of the comparison
tables (the `points` row, the metric rows to be judged, the AIPerf aggregate row)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qualflow.evidence.compare.config import CompareOptions
from qualflow.evidence.compare.noise import (
    Pools,
    comparability_problems,
    merged_spread,
    server_settings,
)
from qualflow.evidence.compare.sides import PointKey, PointSide
from qualflow.evidence.compare.stacks import Kind
from qualflow.evidence.compare.stats import (
    METRICS,
    VERSION_WORDS,
    beyond_default_floor,
    default_floor_applies,
    metric_rows,
)


@dataclass(frozen=True)
class PointPair:
    """One compared point: base and head there, and the larger of their run-to-run spreads."""

    key: PointKey
    base: PointSide
    head: PointSide
    spread: dict[str, dict[str, float]]  # {metric: {stat: (max - min) / |value|}} (`merged_spread`)

    @property
    def name(self) -> str:
        return "/".join(self.key)

    @property
    def noise_measured(self) -> bool:
        return self.base.noise_measured and self.head.noise_measured

    @classmethod
    def of(cls, key: PointKey, base: PointSide, head: PointSide, pools: Pools) -> PointPair:
        spread = merged_spread(
            pools.spread(list(base.pool), key[2]), pools.spread(list(head.pool), key[2])
        )
        return cls(key, base, head, spread)

    def comparability(self, kind: Kind) -> tuple[list[str], list[str]]:
        """(problems that refuse the compare unless forced, notes for the page)."""
        b, h = self.base, self.head
        return comparability_problems(
            self.name,
            b.fingerprint,
            h.fingerprint,
            b.run,
            h.run,
            settings_may_differ=kind.cross_stack,
        )


def point_row(p: PointPair) -> dict:
    """The pair's row of the `points` table: runs, statuses, pass counts, noise pools and
    comparability."""
    b, h = p.base, p.head
    fb, fh = b.fingerprint, h.fingerprint
    ss_b, ss_h = server_settings(b.run), server_settings(h.run)
    return {
        "model": p.key[0],
        "profile": p.key[1],
        "point_id": p.key[2],
        "base_noise_runs": len(b.pool) - 1,
        "head_noise_runs": len(h.pool) - 1,
        "base_comparable_runs": ", ".join(r.run_id for r in b.pool),
        "head_comparable_runs": ", ".join(r.run_id for r in h.pool),
        "noise_measured": p.noise_measured,
        "base_run": b.label,
        "head_run": h.label,
        "base_status": b.status,
        "head_status": h.status,
        "status_changed": b.status != h.status,
        "base_correctness_passed": b.correctness[0],
        "base_correctness_cases": b.correctness[1],
        "head_correctness_passed": h.correctness[0],
        "head_correctness_cases": h.correctness[1],
        "base_protocol_passed": b.protocol[0],
        "base_protocol_checks": b.protocol[1],
        "head_protocol_passed": h.protocol[0],
        "head_protocol_checks": h.protocol[1],
        "base_output_tps": b.output_tps,
        "head_output_tps": h.output_tps,
        "base_n": b.n,
        "head_n": h.n,
        "dataset_sha256_base": fb.dataset_sha256,
        "dataset_sha256_head": fh.dataset_sha256,
        "dataset_equal": dataset_equal(p),
        "workload_equal": fb.workload == fh.workload,
        "server_settings_equal": (None if ss_b is None or ss_h is None else ss_b == ss_h),
    }


def dataset_equal(p: PointPair) -> bool:
    ds = p.base.fingerprint.dataset_sha256
    return bool(ds and ds == p.head.fingerprint.dataset_sha256)


def pair_metric_rows(p: PointPair, opts: CompareOptions, resamples: int) -> list[dict]:
    """The pair's rows of every metric and statistic, each with its bootstrap (judged by
    `judge_family`)."""
    rows = []
    for mt, lab, unit, lower in METRICS:
        for row in metric_rows(
            p.base.samples[mt],
            p.head.samples[mt],
            unit=unit,
            lower_is_better=lower,
            opts=opts,
            resamples=resamples,
            empirical_rel=p.spread.get(mt),
            noise_measured=p.noise_measured,
        ):
            rows.append(
                {
                    "model": p.key[0],
                    "profile": p.key[1],
                    "point_id": p.key[2],
                    "metric": mt,
                    "label": lab,
                    **row,
                    "base_run": p.base.label,
                    "head_run": p.head.label,
                }
            )
    return rows


def aggregate_row(
    p: PointPair, opts: CompareOptions, words: tuple[str, str] = VERSION_WORDS
) -> dict | None:
    """AIPerf's aggregate output tokens/s, base and head: one value per run, so shown without a
    test; where run-to-run noise is neither measured nor configured, a delta beyond the default
    floor is judged all the same (`stats.beyond_default_floor`)."""
    b, h = p.base, p.head
    bt, ht = b.output_tps, h.output_tps
    if bt is None or ht is None or not np.isfinite([bt, ht]).all():
        return None
    rel = float((ht - bt) / bt) if bt else float("nan")
    beyond = not p.noise_measured and not opts.floor_configured and default_floor_applies(rel, opts)
    return {
        "model": p.key[0],
        "profile": p.key[1],
        "point_id": p.key[2],
        "metric": "output_token_throughput_tps",
        "label": "output tokens/s (AIPerf aggregate)",
        "unit": "tok/s",
        "lower_is_better": False,
        "stat": "aggregate",
        "base": float(bt),
        "head": float(ht),
        "delta": float(ht - bt),
        "rel_delta": rel,
        "n_base": b.n,
        "n_head": h.n,
        "mw_p": float("nan"),
        "p_value": float("nan"),
        "q_value": float("nan"),
        "ci_low": float("nan"),
        "ci_high": float("nan"),
        "ci_level": float("nan"),
        "resamples": 0,
        "noise_floor": float("nan"),
        "noise_floor_empirical_rel": 0.0,
        "noise_measured": False,
        "floor_configured": False,
        "tests_in_family": 0,
        "tested": False,
        "significant": beyond,
        "verdict": (
            beyond_default_floor(ht < bt, opts, words)
            if beyond
            else "not tested (one value per run)"
        ),
        "base_run": b.label,
        "head_run": h.label,
    }
