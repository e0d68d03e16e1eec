"""`compare_evidence`: two evidence sets side by side, for every common model/profile/workload
point, with a verdict on whether each delta is beyond run-to-run noise.

Two runs are comparable only with the same dataset identity, workload settings and server settings
per point; otherwise the comparison is refused, unless forced (the page then says so at the top)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from qualflow.evidence import store
from qualflow.evidence.compare.config import CompareOptions
from qualflow.evidence.compare.names import SideName, side_names
from qualflow.evidence.compare.noise import Pools
from qualflow.evidence.compare.pairs import (
    PointPair,
    aggregate_row,
    dataset_equal,
    pair_metric_rows,
    point_row,
)
from qualflow.evidence.compare.protocol import (
    ProtocolMatrix,
    comparison_matrix,
    protocol_pair,
    side_checks,
)
from qualflow.evidence.compare.provenance import COLUMNS as PROVENANCE_COLUMNS
from qualflow.evidence.compare.provenance import provenance_row, side_by_side
from qualflow.evidence.compare.samples import samples_of
from qualflow.evidence.compare.sides import PointKey, Side
from qualflow.evidence.compare.stacks import (
    CROSS_STACK,
    CROSS_VERSION,
    Kind,
    comparison_kind,
    point_key,
)
from qualflow.evidence.compare.stats import (
    METRICS,
    STATS,
    is_tested,
    judge_family,
    resamples_for,
    words_for,
)

ONLY_IN_COLUMNS = ["model", "profile", "point_id", "only_in", "run_id"]


class CompareRefused(ValueError):
    """The two runs are not comparable (dataset, workload or server settings differ) and --force
    was not given."""


@dataclass(frozen=True)
class Comparison:
    """A comparison's tables (one row per metric test, per point, per provenance field), what was
    refused or not checked, and the per-request samples the page plots."""

    base: str
    head: str
    metrics: pd.DataFrame
    points: pd.DataFrame
    provenance: pd.DataFrame
    only_in: pd.DataFrame
    problems: list[str] = field(default_factory=list)  # comparability problems (only when forced)
    samples: dict = field(
        default_factory=dict
    )  # (model, profile, point) -> {side: {metric: array}}
    options: CompareOptions = field(default_factory=CompareOptions)
    notes: list[str] = field(
        default_factory=list
    )  # what could not be checked (e.g. unknown server settings)
    kind: str = CROSS_VERSION  # cross-version | cross-stack (stacks.Kind)
    kind_detail: str = ""
    protocol: ProtocolMatrix = field(
        default_factory=lambda: ProtocolMatrix(pd.DataFrame())
    )  # per pair
    names: tuple[SideName, ...] = ()  # (base, head) as the page names them (`names`)
    statuses: dict = field(
        default_factory=dict
    )  # (model, profile, point) -> {side: summary figures}

    @property
    def words(self) -> tuple[str, str]:
        """The verdicts' words for the head worse / better: regression / improvement between
        versions, a difference between stacks."""
        return words_for(self.kind == CROSS_STACK)


def compare_evidence(
    base_refs: list[store.RunRef],
    head_refs: list[store.RunRef],
    *,
    base: str,
    head: str,
    opts: CompareOptions | None = None,
    root=None,
) -> Comparison:
    opts = opts or CompareOptions()
    b, h = Side.load("base", base, base_refs), Side.load("head", head, head_refs)
    kind = comparison_kind(base_refs, head_refs, b.runs, h.runs)
    pb, ph = (
        s.points(lambda r, point_id: point_key(r, point_id, kind, base_refs, head_refs))
        for s in (b, h)
    )
    only = _only_in(pb, ph)
    common = sorted(set(pb) & set(ph))
    if not common:
        raise CompareRefused(
            f"base {base!r} and head {head!r} have no model/profile/workload point in common "
            f"(base: {sorted(pb) or 'none'}; head: {sorted(ph) or 'none'})"
        )
    pools = Pools(root, samples_of)
    pairs = [
        PointPair.of(k, b.at(k[2], *pb[k], pools), h.at(k[2], *ph[k], pools), pools) for k in common
    ]
    problems, notes = _comparability(pairs, kind)
    if problems and not opts.force:
        raise CompareRefused(
            "refusing to compare: the runs are not comparable:\n  "
            + "\n  ".join(problems)
            + "\n(pass --force to compare anyway; the page will say so at the top)"
        )
    provenance, protocol = _provenance_and_protocol(pairs, b, h)
    metrics = _metric_table(pairs, opts, words_for(kind.cross_stack))
    return Comparison(
        base=base,
        head=head,
        metrics=metrics,
        points=pd.DataFrame([point_row(p) for p in pairs]),
        provenance=provenance,
        only_in=pd.DataFrame(only, columns=ONLY_IN_COLUMNS),
        problems=problems,
        samples={p.key: {"base": p.base.samples, "head": p.head.samples} for p in pairs},
        options=opts,
        notes=notes,
        kind=kind.kind,
        kind_detail=kind.detail,
        protocol=protocol,
        names=side_names(base_refs, head_refs, b.runs, h.runs),
        statuses={p.key: {"base": p.base.figures(), "head": p.head.figures()} for p in pairs},
    )


def _only_in(pb: dict, ph: dict) -> list[dict]:
    """The points of one side only (not compared): base's, then head's."""
    return [
        {
            "model": k[0],
            "profile": k[1],
            "point_id": k[2],
            "only_in": side,
            "run_id": mine[k][0].run_id,
        }
        for side, mine, other in (("base", pb, ph), ("head", ph, pb))
        for k in sorted(set(mine) - set(other))
    ]


def _comparability(pairs: list[PointPair], kind: Kind) -> tuple[list[str], list[str]]:
    problems, notes = [], []
    for p in pairs:
        pr, n = p.comparability(kind)
        problems += pr
        notes += n
    return problems, notes


def _metric_table(
    pairs: list[PointPair], opts: CompareOptions, words: tuple[str, str]
) -> pd.DataFrame:
    """Every metric row of every pair, judged as one family, then the aggregates, in `words` (a
    regression between versions, a difference between stacks); points kept together in the pairs'
    order (each point's metrics, then its aggregate)."""
    # one family of tests over every point: the resample count is scaled to its most stringent level
    m = sum(
        is_tested(len(p.base.samples[mt]), len(p.head.samples[mt]), q)
        for p in pairs
        for mt, *_ in METRICS
        for _, q in STATS
    )
    resamples = resamples_for((1 - opts.confidence) / max(m, 1), opts.resamples)
    rows = [r for p in pairs for r in pair_metric_rows(p, opts, resamples)]
    aggregates = [a for a in (aggregate_row(p, opts, words) for p in pairs) if a]
    table = pd.DataFrame(judge_family(rows, opts, words) + aggregates)
    if not len(table):
        return table
    order = {p.key: i for i, p in enumerate(pairs)}
    table["_o"] = [
        order[(r["model"], r["profile"], r["point_id"])] for r in table.to_dict("records")
    ]
    return table.sort_values("_o", kind="stable").drop(columns="_o").reset_index(drop=True)


def _provenance_and_protocol(
    pairs: list[PointPair], b: Side, h: Side
) -> tuple[pd.DataFrame, ProtocolMatrix]:
    """Per compared model/profile (its first pair's runs): the provenance side by side with each
    point's dataset identity, and the protocol matrix."""
    rows, matrices = [], []
    for mp in sorted({p.key[:2] for p in pairs}):
        mine = [p for p in pairs if p.key[:2] == mp]
        rb, rh = mine[0].base.ref.run_id, mine[0].head.ref.run_id
        matrices.append(
            protocol_pair(
                f"{mp[0]}/{mp[1]}",
                side_checks(b.evidence["protocol"], {rb}),
                side_checks(h.evidence["protocol"], {rh}),
            )
        )
        rows += side_by_side(
            *mp,
            provenance_row(b.runs, b.evidence["correctness"], rb),
            provenance_row(h.runs, h.evidence["correctness"], rh),
        )
        rows += [_dataset_row(p) for p in mine]
    return pd.DataFrame(rows, columns=PROVENANCE_COLUMNS), comparison_matrix(matrices)


def _dataset_row(p: PointPair) -> dict:
    key: PointKey = p.key
    return {
        "model": key[0],
        "profile": key[1],
        "field": f"dataset_sha256[{key[2]}]",
        "base": p.base.fingerprint.dataset_sha256,
        "head": p.head.fingerprint.dataset_sha256,
        "differs": not dataset_equal(p),
    }
