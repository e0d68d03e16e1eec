"""Comparability and run-to-run noise of a comparison.

A run's *fingerprint* at a workload point is what must be equal for two runs to measure the same
thing: dataset identity (AIPerf inputs.json sha256), workload settings, server settings (device,
max_batch, max_context, cpu_threads, AIPerf workers, ...) and the status reached. Evidence written
before `runs.server_settings` existed has them *unknown*: such a run is never counted as comparable
for the noise floor, and a compare against it says that the settings could not be checked.

The run-to-run noise of one side is measured from its *pool*: the compared run plus every other run
of the same software version, model and profile in the store with the same fingerprint at that point
(re-qualifications kept in the history, or repeats of a point: each repeat is its own run id). With
>= 2 runs in the pool the spread of each statistic across them is measured: (max - min) / |value of
the compared run|."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from qualflow.aiperf.command import AiperfPoint
from qualflow.evidence import store
from qualflow.evidence.compare.stats import METRICS, STATS


def parse_json(v):
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    try:
        return json.loads(v) if isinstance(v, str) else v
    except ValueError:
        return v


def server_settings(run_row: dict) -> dict | None:
    """The run's server settings, or None when the evidence does not record them (older
    evidence)."""
    s = parse_json(run_row.get("server_settings"))
    return s if isinstance(s, dict) and s else None


# workload settings that do not change what one run measures: left out of the fingerprint
NOT_MEASURED = ("repeats", "harness_ceiling")


def workload_settings(run_row: dict) -> dict:
    """The run's workload point with every AiperfPoint default filled in, so a point recorded with
    only the keys it set (older evidence) equals the same point recorded with all of them; a
    workload that is not a point (hand-made evidence) is taken as recorded."""
    wl = parse_json(run_row.get("workload")) or {}
    if isinstance(wl, dict):
        try:
            wl = AiperfPoint.from_dict(wl).to_dict()
        except (TypeError, ValueError):
            pass
    return {k: v for k, v in wl.items() if k not in NOT_MEASURED} if isinstance(wl, dict) else {}


@dataclass(frozen=True)
class Fingerprint:
    dataset_sha256: str | None
    workload: str  # canonical JSON
    server_settings: str | None  # canonical JSON; None = unknown
    status: str | None
    input_file_sha256: str | None = None  # the prompt file of a real-prompt workload
    # the payloads without `model`: compared across stacks only, never part of run equality
    payloads_sha256: str | None = field(default=None, compare=False)

    def comparable_to(self, other: Fingerprint) -> bool:
        return (
            self.dataset_sha256 is not None and self.server_settings is not None and self == other
        )


def fingerprint(run_row: dict, summary_row: dict | None = None) -> Fingerprint:
    ds = (summary_row or {}).get("dataset_sha256") or run_row.get("dataset_sha256") or None
    ss = server_settings(run_row)
    wl = workload_settings(run_row)
    pf = run_row.get("input_file_sha256")
    return Fingerprint(
        dataset_sha256=ds,
        workload=json.dumps(wl, sort_keys=True),
        server_settings=None if ss is None else json.dumps(ss, sort_keys=True),
        status=run_row.get("status"),
        input_file_sha256=pf if isinstance(pf, str) and pf else None,
        payloads_sha256=(summary_row or {}).get("payloads_sha256") or None,
    )


def dict_diff(a: dict, b: dict) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def comparability_problems(
    label: str,
    fb: Fingerprint,
    fh: Fingerprint,
    xb: dict,
    xh: dict,
    settings_may_differ: bool = False,
) -> tuple[list[str], list[str]]:
    """(problems that refuse the compare unless forced, notes shown on the page) for one point.
    `settings_may_differ` (a cross-stack comparison): differing server settings are a note."""
    problems, notes = [], []
    if (
        settings_may_differ
    ):  # across stacks the model name in each payload differs; the rest must not
        if not fb.payloads_sha256 or fb.payloads_sha256 != fh.payloads_sha256:
            problems.append(
                f"{label}: the requests differ (inputs.json payloads without `model`, sha256 base "
                f"{fb.payloads_sha256 or 'unknown'}, head {fh.payloads_sha256 or 'unknown'})"
            )
    elif not fb.dataset_sha256 or not fh.dataset_sha256 or fb.dataset_sha256 != fh.dataset_sha256:
        problems.append(
            f"{label}: dataset identity differs (AIPerf inputs.json sha256 base "
            f"{fb.dataset_sha256 or 'unknown'}, head {fh.dataset_sha256 or 'unknown'})"
        )
    if fb.input_file_sha256 != fh.input_file_sha256:
        problems.append(
            f"{label}: prompt file differs (sha256 base {fb.input_file_sha256 or 'none'}, head "
            f"{fh.input_file_sha256 or 'none'})"
        )
    wl_b, wl_h = json.loads(fb.workload), json.loads(fh.workload)
    if wl_b != wl_h:
        diff = dict_diff(wl_b, wl_h)
        problems.append(
            f"{label}: workload differs in {', '.join(diff)} (base "
            f"{ {k: wl_b.get(k) for k in diff} }, head { {k: wl_h.get(k) for k in diff} })"
        )
    sb, sh = server_settings(xb), server_settings(xh)
    if sb is None or sh is None:
        sides = " and ".join(s for s, v in (("base", sb), ("head", sh)) if v is None)
        notes.append(
            f"{label}: server settings unknown for {sides} (evidence written before "
            "runs.server_settings "
            "was recorded): max_batch, max_context, cpu_threads, device and AIPerf workers were "
            "not checked, and such runs never count towards the measured noise floor"
        )
    elif sb != sh:
        diff = dict_diff(sb, sh)
        msg = (
            f"{label}: server settings differ in {', '.join(diff)} (base "
            f"{ {k: sb.get(k) for k in diff} }, head { {k: sh.get(k) for k in diff} })"
        )
        (notes if settings_may_differ else problems).append(
            msg + (" - by design: different stacks" if settings_may_differ else "")
        )
    return problems, notes


class Pools:
    """Finds and caches, per side, the comparable runs of a point and their per-request samples."""

    def __init__(self, root, samples_of):
        self.root = root
        self.samples_of = samples_of  # (evidence dict, run_id, point_id) -> {metric: array}
        self._refs = store.list_runs(root) if root is not None else []
        self._ev: dict[tuple[str, str], dict] = {}

    def evidence(self, ref: store.RunRef) -> dict:
        k = (ref.version, ref.run_id)
        if k not in self._ev:
            self._ev[k] = store.load([ref])
        return self._ev[k]

    def _fingerprint(self, ref: store.RunRef, point_id: str) -> Fingerprint | None:
        ev = self.evidence(ref)
        runs, summ = ev["runs"], ev["summary"]
        x = runs[runs["point_id"] == point_id].to_dict("records") if len(runs) else []
        if not x:
            return None
        s = (
            summ[summ["point_id"] == point_id].to_dict("records")
            if len(summ) and "point_id" in summ
            else []
        )
        return fingerprint(x[0], s[0] if s else None)

    def pool(self, ref: store.RunRef, point_id: str, fp: Fingerprint) -> list[store.RunRef]:
        """The compared run first, then the other comparable runs of its version/model/profile."""
        out = [ref]
        if not fp.comparable_to(
            fp
        ):  # unknown settings or dataset: nothing is known to be comparable
            return out
        for r in self._refs:
            if (r.version, r.model, r.profile) != (
                ref.version,
                ref.model,
                ref.profile,
            ) or r.run_id == ref.run_id:
                continue
            f = self._fingerprint(r, point_id)
            if f is not None and f.comparable_to(fp):
                out.append(r)
        return out

    def spread(self, pool: list[store.RunRef], point_id: str) -> dict[str, dict[str, float]]:
        """{metric: {stat: (max - min) / |compared run's value|}} over the pool (empty with one
        run)."""
        if len(pool) < 2:
            return {}
        per_run = [self.samples_of(self.evidence(r), r.run_id, point_id) for r in pool]
        out: dict[str, dict[str, float]] = {}
        for m, *_ in METRICS:
            for stat, q in STATS:
                vals = [float(np.percentile(s[m], q)) for s in per_run if len(s[m])]
                ref = float(np.percentile(per_run[0][m], q)) if len(per_run[0][m]) else float("nan")
                if len(vals) >= 2 and np.isfinite(ref) and ref:
                    out.setdefault(m, {})[stat] = (max(vals) - min(vals)) / abs(ref)
        return out


def merged_spread(a: dict, b: dict) -> dict[str, dict[str, float]]:
    """The larger of two sides' spreads per metric/stat."""
    out: dict[str, dict[str, float]] = {}
    for d in (a, b):
        for m, st in d.items():
            for s, v in st.items():
                out.setdefault(m, {})[s] = max(out.get(m, {}).get(s, 0.0), v)
    return out
