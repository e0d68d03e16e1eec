"""`qualflow join`: the evidence tables of one serving session (requests, summary, correctness,
protocol, runs, targets). In steps: read the session's records (`Sources`), join the requests
(evidence.requests), summarise and judge each AIPerf run of each point (evidence.summary,
evidence.status), judge each point's SLOs over its repeats (evidence.slo), and write the tables, per
run id too, into the store (evidence.writing, evidence.store)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from qualflow.aiperf import exports
from qualflow.aiperf.command import AiperfPoint
from qualflow.configs import from_args
from qualflow.evidence import slo as slo_mod
from qualflow.evidence.freshness import Measured
from qualflow.evidence.inputs import EvidenceInputs, Sources
from qualflow.evidence.requests import request_table
from qualflow.evidence.reruns import Reruns
from qualflow.evidence.roofline import Roofline
from qualflow.evidence.samples import is_server_metric
from qualflow.evidence.schema import SCHEMA_VERSION, SERVER_METRICS, conform
from qualflow.evidence.session_columns import session_columns
from qualflow.evidence.status import StatusInputs, accounting_ok, qualification_status, slo_ok
from qualflow.evidence.summary import summarize_point
from qualflow.evidence.writing import JoinedTables, write_evidence
from qualflow.phases import point_key
from qualflow.session.points import read_points
from qualflow.session.records import PointRun, repeat_run_id, run_id_of

SERVER_TIMING_UNAVAILABLE = (
    "server timing not available (external endpoint): accounted on the client side only "
    "(every AIPerf record once, no errors, each stream's terminal event checked); "
    "requests rows are client-only by design, and the latency figures and SLOs are "
    "taken over them; the server-side figures (" + ", ".join(SERVER_METRICS) + ") are null"
)
SERVER_FIGURE_NULL = (
    "null: server timing not available (external endpoint), so no server-side figure exists"
)


@dataclass(frozen=True, eq=False)
class Joined:
    """What every point's judgement reads: the inputs and sources, the session's run id and key
    columns, its requests, correctness and protocol tables, and the `implemented` rung."""

    inputs: EvidenceInputs
    src: Sources
    run_id: str
    key: dict
    requests: pd.DataFrame
    correctness: pd.DataFrame
    protocol: pd.DataFrame
    implemented: tuple[bool, list[str]]
    slos: Mapping[str, dict]
    reruns: Reruns  # the harness ceiling's and cache-off runs (evidence.reruns)
    roofline: Roofline  # what the points' rooflines rest on (evidence.roofline)


@dataclass(frozen=True, eq=False)
class Repeat:
    """One AIPerf run of a point: its run id, summary row, run.json and what its status rests on."""

    run_id: str
    summary: dict
    run: PointRun | None
    status: StatusInputs


def _keyed(df: pd.DataFrame, key: dict, table: str) -> pd.DataFrame:
    for k, v in key.items():
        df[k] = v
    return conform(df, table)


def _implemented(inputs: EvidenceInputs, src: Sources) -> tuple[bool, list[str]]:
    """Our server: the bundle was built and the server came up healthy. An endpoint: reachable, and
    /v1/models names the model."""
    failure, healthy = src.session.failure(), src.startup.healthy
    if src.session.endpoint:
        ok = healthy and src.startup.serves_model
        return ok, [failure] if failure and not ok else (
            [] if ok else ["endpoint not reachable or not serving the model"]
        )
    return bool(src.manifest) and healthy, (
        ([] if src.manifest else [f"no bundle manifest in {inputs.bundle}"])
        + ([failure] if failure and not healthy else [])
    )


def _prepare(
    inputs: EvidenceInputs, points: Sequence[AiperfPoint], slos: Mapping[str, dict] | None
) -> Joined:
    src = Sources.read(inputs)
    session_dir = Path(inputs.session)
    run_id = src.session.run_id or run_id_of(
        inputs.model, inputs.profile, src.session.session_started_ns or 0
    )
    key = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "software_key": inputs.software_key,
        "model": inputs.model,
        "profile": inputs.profile,
    }
    corr = (
        pd.read_parquet(inputs.correctness)
        if inputs.correctness and Path(inputs.correctness).exists()
        else pd.DataFrame()
    )
    proto_path = session_dir / "protocol.parquet"
    proto = (
        pd.read_parquet(proto_path)
        if proto_path.exists()
        else pd.DataFrame(columns=["name", "passed", "detail", "request_id"])
    )
    return Joined(
        inputs=inputs,
        src=src,
        run_id=run_id,
        key=key,
        requests=request_table(session_dir, points, key, run_id),
        correctness=_keyed(corr, key, "correctness"),
        protocol=_keyed(proto, key, "protocol"),
        implemented=_implemented(inputs, src),
        slos=slos or {},
        reruns=Reruns.read(session_dir, src.session),
        roofline=Roofline.read(
            inputs.bundle,
            src.manifest,
            src.session.device,
            src.session.gpu,
            src.provenance.get("hardware") or {},
        ),
    )


def _repeat(j: Joined, p: AiperfPoint, k: int) -> Repeat:
    rid = repeat_run_id(j.run_id, k)
    pdir = Path(j.inputs.session) / "points" / point_key(p.point_id, k)
    run = PointRun.read(pdir / "run.json")
    requests = j.requests[j.requests["run_id"] == rid]
    srow = summarize_point(
        requests,
        p,
        run,
        exports.read_summary(pdir / "aiperf"),
        goodput=slo_mod.goodput_bounds(j.slos.get(p.point_id)),
        payloads_sha=exports.payloads_sha256(pdir / "aiperf"),
        server_timing=not j.src.session.endpoint,
    )
    srow.update(repeat=k, repeats=p.repeats)
    session = j.src.session
    # the reruns' figures beside the stack's, never part of its status
    srow.update(j.reruns.columns(p, srow.get("output_token_throughput_tps")))
    srow.update(j.roofline.point_columns(p, requests, srow.get("output_token_throughput_tps")))
    acc_ok, acc_reasons = accounting_ok(srow, server_timing=not session.endpoint)
    status = StatusInputs(
        implemented=j.implemented[0],
        implemented_reasons=j.implemented[1],
        correctness=j.correctness,
        protocol=j.protocol,
        protocol_enabled=session.protocol_checks,
        aiperf_ok=srow["aiperf_ok"] and not session.failure(),
        aiperf_reasons=run.verdict.reasons if run and run.verdict else ["AIPerf did not run"],
        accounting_ok=acc_ok,
        accounting_reasons=acc_reasons,
        expected_thresholds_version=j.inputs.thresholds_version,
        client_pin_reasons=session.client_pin_reasons or [],
    )
    return Repeat(rid, srow, run, status)


def _slo_rung(
    j: Joined, p: AiperfPoint, reps: list[Repeat]
) -> tuple[tuple[bool, list[str]], list[dict]]:
    """The point's SLOs over every repeat (judged only when every repeat is qualified): the
    `slo-met` rung and the `targets` rows."""
    below = []
    for rep in reps:
        st, why = qualification_status(rep.status, slo=(True, []))
        if st != "slo-met":
            below.append(f"run {rep.run_id} is {st} ({'; '.join(why)})")
    figs, misses, configured = slo_mod.evaluate([r.summary for r in reps], j.slos.get(p.point_id))
    if j.src.session.endpoint:
        for f in figs:
            if f.mean is None and is_server_metric(f.figure):
                f.reason = f"{f.reason}; {SERVER_FIGURE_NULL}" if f.reason else SERVER_FIGURE_NULL
    rids = json.dumps([r.run_id for r in reps])
    targets = [
        {
            **j.key,
            "point_id": p.point_id,
            "workload": p.workload,
            "load_kind": reps[0].summary["load_kind"],
            "load": p.request_rate if p.request_rate is not None else p.concurrency,
            **f.row(),
            "repeat_run_ids": rids,
        }
        for f in figs
    ]
    return slo_ok(configured, misses, below), targets


def _commands(j: Joined, p: AiperfPoint, run: PointRun | None) -> str:
    """`runs.commands`, with the servers' and AIPerf's commands of the point's reruns (the harness
    ceiling, the cache-off rerun) where it had them."""
    commands, more = j.src.commands(run), j.reruns.commands(p)
    return json.dumps({**json.loads(commands), **more}, default=str) if more else commands


def _judge_point(
    j: Joined, p: AiperfPoint, shared: dict
) -> tuple[list[dict], list[dict], list[dict]]:
    """The point's summary, runs and targets rows: each repeat's status, the SLOs over all of
    them."""
    reps = [_repeat(j, p, k) for k in range(1, p.repeats + 1)]
    rung, targets = _slo_rung(j, p, reps)
    failure, summaries, runs = j.src.session.failure(), [], []
    for rep in reps:
        status, reasons = qualification_status(rep.status, slo=rung)
        if failure and failure not in reasons:
            reasons.append(failure)
        if j.src.session.endpoint:
            reasons.append(SERVER_TIMING_UNAVAILABLE)
        rep.summary["status"] = status
        rkey = {**j.key, "run_id": rep.run_id}
        summaries.append({**rkey, **rep.summary})
        run = rep.run
        runs.append(
            {
                **rkey,
                **shared,
                "point_id": p.point_id,
                "status": status,
                "status_reasons": "; ".join(reasons) or None,
                "dataset_sha256": run.dataset_sha256 if run else None,
                "seed": p.seed,
                "input_file_sha256": run.input_file_sha256 if run else None,
                "streaming": p.streaming,
                "workload": json.dumps(p.to_dict(), sort_keys=True),
                "commands": _commands(j, p, run),
            }
        )
    return summaries, runs, targets


def build_evidence(
    inputs: EvidenceInputs, points: Sequence[AiperfPoint], slos: Mapping[str, dict] | None = None
) -> dict:
    """The evidence of the session in `inputs.session` over `points` (those it ran), each point's
    SLO from `slos` (point id -> SLO block, qualflow.evidence.slo)."""
    out = Path(inputs.out)
    out.mkdir(parents=True, exist_ok=True)
    j = _prepare(inputs, points, slos)
    shared = session_columns(j.src, j.inputs.device)
    summaries, runs, targets = [], [], []
    for p in points:
        s, r, t = _judge_point(j, p, shared)
        summaries += s
        runs += r
        targets += t
    res = write_evidence(
        out,
        JoinedTables(j.run_id, j.requests, j.correctness, j.protocol),
        summaries,
        runs,
        targets,
    )
    Measured.of(
        out,
        inputs.session,
        j.run_id,
        inputs.model,
        inputs.profile,
        inputs.bundle,
        j.src.manifest.get("bundle_hash"),
    ).write(out)
    return res


def main_join(a) -> int:
    plan = read_points(a.points)
    res = build_evidence(from_args(EvidenceInputs, a), plan.points, plan.slos)
    print(json.dumps(res, indent=2))
    return 0
