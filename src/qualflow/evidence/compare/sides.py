"""The two sides of a comparison as typed records: a `Side` is what the user named (base or head)
with its runs' evidence loaded once; a `PointSide` is that side at one compared point."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from qualflow.evidence import store
from qualflow.evidence.compare.noise import Fingerprint, Pools, fingerprint
from qualflow.evidence.compare.samples import matched_profiling, point_samples
from qualflow.evidence.samples import runs_without_server_timing

PointKey = tuple[str, str, str]  # (model, profile, point id) as compared


@dataclass(frozen=True)
class PointSide:
    """One side of one compared point."""

    ref: store.RunRef
    run: dict  # the point's `runs` row
    summary: dict  # its `summary` row ({} when there is none)
    fingerprint: Fingerprint
    pool: tuple[store.RunRef, ...]  # the runs comparable to it, itself first
    samples: dict[str, np.ndarray]  # {metric: per-request values}
    correctness: tuple[int, int]  # (passed, cases) of its run
    protocol: tuple[int, int]  # (passed, checks) of its run

    @property
    def label(self) -> str:
        return self.ref.label

    @property
    def status(self):
        return self.run.get("status")

    @property
    def noise_measured(self) -> bool:
        """Run-to-run noise needs >= 2 comparable runs."""
        return len(self.pool) >= 2

    @property
    def output_tps(self):
        return self.summary.get("output_token_throughput_tps")

    @property
    def n(self) -> int:
        """The point's samples (matched requests, or an endpoint's client-only ones)."""
        return max((len(v) for v in self.samples.values()), default=0)

    def figures(self) -> dict:
        """What the first screen shows of this side beside the tested percentiles: AIPerf's output
        tokens/s, the error rate, the status and the summary's percentiles (a fallback where a
        metric has no row)."""
        keep = (
            "output_token_throughput_tps",
            "error_rate",
            "client_ttft_ms_p50",
            "client_ttft_ms_p99",
            "client_itl_ms_p50",
            "client_itl_ms_p99",
        )
        return {**{k: self.summary.get(k) for k in keep}, "status": self.status}


@dataclass(frozen=True)
class Side:
    """Base or head: the spec as given, the runs it resolved to and their evidence tables."""

    name: str  # "base" | "head"
    spec: str
    refs: tuple[store.RunRef, ...]
    evidence: dict[str, pd.DataFrame]  # `store.load(refs)`
    requests: pd.DataFrame  # the rows carrying a request's figures (`matched_profiling`)

    @classmethod
    def load(cls, name: str, spec: str, refs: list[store.RunRef]) -> Side:
        ev = store.load(refs)
        return cls(
            name,
            spec,
            tuple(refs),
            ev,
            matched_profiling(ev["requests"], runs_without_server_timing(ev["runs"])),
        )

    @property
    def runs(self) -> pd.DataFrame:
        return self.evidence["runs"]

    def points(
        self, key: Callable[[store.RunRef, str], PointKey]
    ) -> dict[PointKey, tuple[store.RunRef, dict]]:
        """{compared point key: (its run, its `runs` row)} over every run of the side."""
        out = {}
        for r in self.refs:
            for x in self.runs[self.runs["run_id"] == r.run_id].to_dict("records"):
                out[key(r, x["point_id"])] = (r, x)
        return out

    def summary_row(self, run_id: str, point_id: str) -> dict:
        s = self.evidence["summary"]
        s = s[(s["run_id"] == run_id) & (s["point_id"] == point_id)] if not s.empty else s
        return s.iloc[0].to_dict() if len(s) else {}

    def pass_count(self, table: str, run_id: str) -> tuple[int, int]:
        """(passed, rows) of one run in the `correctness` or `protocol` table."""
        df = self.evidence[table]
        if df.empty:
            return 0, 0
        d = df[df["run_id"] == run_id]
        return int(d["passed"].astype(bool).sum()), len(d)

    def at(self, point_id: str, ref: store.RunRef, run: dict, pools: Pools) -> PointSide:
        """This side at one compared point (its run `ref`, whose `runs` row is `run`)."""
        summary = self.summary_row(ref.run_id, point_id)
        fp = fingerprint(run, summary)
        return PointSide(
            ref=ref,
            run=run,
            summary=summary,
            fingerprint=fp,
            pool=tuple(pools.pool(ref, point_id, fp)),
            samples=point_samples(self.requests, ref.run_id, point_id),
            correctness=self.pass_count("correctness", ref.run_id),
            protocol=self.pass_count("protocol", ref.run_id),
        )
