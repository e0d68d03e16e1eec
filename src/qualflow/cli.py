"""`qualflow <stage>`: every workflow stage is runnable on its own. Handlers import lazily."""

from __future__ import annotations

import argparse
import sys


def _embedded(a):
    from qualflow.artifacts.embedded import main_embedded

    return main_embedded(a)


def _pin(a):
    from qualflow.artifacts.pin import main_pin

    return main_pin(a)


def _build(a):
    from qualflow.artifacts.bundle import main_build

    return main_build(a)


def _correctness(a):
    """Family correctness of our bundle, or endpoint correctness where the model's serving settings
    (--model-settings, written by the workflow) name an endpoint."""
    if a.model_settings:
        import json

        from qualflow.workflow_config import read_serving_settings

        endpoint = read_serving_settings(a.model_settings)["endpoint"]
        if endpoint is not None:
            from qualflow.session.endpoint import main_endpoint_correctness

            a.endpoint, a.checkpoint = json.dumps(endpoint, sort_keys=True), None
            return main_endpoint_correctness(a)
    if not a.bundle:
        raise ValueError("--bundle is required (or --model-settings naming an endpoint)")
    from qualflow.correctness.cli import main_correctness

    return main_correctness(a)


def _serve(a):
    from qualflow.server import main_serve

    return main_serve(a)


def _workflow_stage(module: str, func: str):
    """Lazy handler for the workflow stages (session, warmup, protocol, aiperf, join, report,
    status)."""

    def run(a):
        import importlib

        return getattr(importlib.import_module(module), func)(a)

    return run


def add_workflow_stages(sub) -> None:
    """Subcommands of the qualify DAG: the serving session and its client-side stages, AIPerf, the
    evidence join and the report."""
    from qualflow.aiperf.cli import add_aiperf_args  # light: the handlers import the stages
    from qualflow.evidence.inputs import add_join_args
    from qualflow.session import cli as session_cli

    s = sub.add_parser(
        "session", help="serving session: start server, warm-up, protocol, AIPerf points, stop"
    )
    session_cli.add_session_args(s)
    s.set_defaults(func=_workflow_stage("qualflow.session.cli", "main_session"))

    s = sub.add_parser(
        "endpoint-correctness",
        help="endpoint correctness: an endpoint's greedy output against the family reference",
    )
    session_cli.add_endpoint_correctness_args(s)
    s.set_defaults(func=_workflow_stage("qualflow.session.endpoint", "main_endpoint_correctness"))

    s = sub.add_parser(
        "warmup", help="send fixed warm-up requests to a running server, record them"
    )
    session_cli.add_warmup_args(s)
    s.set_defaults(func=_workflow_stage("qualflow.session.warmup", "main_warmup"))

    s = sub.add_parser(
        "protocol", help="Responses conformance checks with the openai SDK against a server"
    )
    session_cli.add_protocol_args(s)
    s.set_defaults(func=_workflow_stage("qualflow.session.conformance", "main_protocol"))

    s = sub.add_parser(
        "aiperf", help="run one pinned AIPerf point against a running server and judge it"
    )
    add_aiperf_args(s)
    s.set_defaults(func=_workflow_stage("qualflow.aiperf.cli", "main_aiperf"))

    s = sub.add_parser("join", help="join AIPerf and server records into the evidence tables")
    add_join_args(s)
    s.set_defaults(func=_workflow_stage("qualflow.evidence.join", "main_join"))

    add_report_stages(sub)

    s = sub.add_parser("provenance", help="print software/hardware provenance and the software key")
    session_cli.add_provenance_args(s)
    s.set_defaults(func=_workflow_stage("qualflow.session.provenance", "main_provenance"))


def add_report_stages(sub) -> None:
    """The run report and the status table over evidence directories."""
    s = sub.add_parser("report", help="HTML report + PNGs from evidence directories")
    s.add_argument("--evidence", nargs="+", required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(func=_workflow_stage("qualflow.report.page", "main_report"))

    s = sub.add_parser("status", help="qualification status table over evidence directories")
    s.add_argument("--evidence", nargs="+", required=True)
    s.add_argument("--out")
    from qualflow.evidence.schema import (
        STATUS_LADDER,
    )  # a light module: names and descriptions only

    s.add_argument("--require", choices=STATUS_LADDER)
    s.set_defaults(func=_workflow_stage("qualflow.report.page", "main_status"))

    from qualflow.report.verdict import add_verdict_args  # light: csv only

    s = sub.add_parser(
        "verdict", help="the status table's verdict: exit 1 unless every point reached --require"
    )
    add_verdict_args(s)
    s.set_defaults(func=_workflow_stage("qualflow.report.verdict", "main_verdict"))


def add_compare_stages(sub) -> None:
    """The versioned evidence store and compare."""
    s = sub.add_parser("evidence", help="the versioned evidence store")
    esub = s.add_subparsers(dest="evidence_cmd", required=True)
    e = esub.add_parser("list", help="versions, runs, models, profiles, workload points and status")
    e.add_argument("--root", default="results/evidence")
    e.set_defaults(func=_workflow_stage("qualflow.evidence.store", "main_evidence_list"))

    s = sub.add_parser("compare", help="compare two software versions' (or runs') evidence")
    s.add_argument(
        "--base", required=True, help="VERSION, RUN_ID, VERSION@RUN_ID or an evidence dir"
    )
    s.add_argument(
        "--head", required=True, help="VERSION, RUN_ID, VERSION@RUN_ID or an evidence dir"
    )
    s.add_argument("--root", default="results/evidence")
    s.add_argument("--out", help="output dir (default results/compare/<base>__vs__<head>)")
    from qualflow.configs import add_arguments
    from qualflow.evidence.compare.config import NOT_ON_CLI, CompareOptions  # light: fields only

    add_arguments(s, CompareOptions, skip=NOT_ON_CLI)
    s.add_argument(
        "--print-out-dir", action="store_true", help="print the default output dir and exit"
    )
    s.set_defaults(func=_workflow_stage("qualflow.report.compare", "main_compare"))


def add_bench_stages(sub) -> None:
    """The benchmarks (qualflow.bench): `bench task` (one point through the Task API; `bench-task`,
    its old name, still works), `bench engine` and `bench server` (the suite's entry points)."""
    from qualflow.bench.config import EngineBenchConfig, ServerBenchConfig  # light: fields only
    from qualflow.bench.task import add_bench_args
    from qualflow.configs import add_arguments

    s = sub.add_parser(
        "bench",
        help="benchmarks: the Task, the engine against its rooflines, the "
        "server against the Task and the harness ceiling",
    )
    bsub = s.add_subparsers(dest="bench_cmd", required=True)
    for name, parent in (("task", bsub), ("bench-task", sub)):
        t = parent.add_parser(
            name,
            help="benchmark one point through the Task API (prints figures)"
            if name == "task"
            else "the old name of `qualflow bench task`",
        )
        add_bench_args(t)
        t.set_defaults(func=_workflow_stage("qualflow.bench.task", "main_bench_task"))
    e = bsub.add_parser(
        "engine",
        help="Task-level points, offline workload and rooflines, beside "
        "the last committed run of the same GPU model",
    )
    add_arguments(e, EngineBenchConfig)
    e.set_defaults(func=_workflow_stage("qualflow.bench.engine", "main_bench_engine"))
    v = bsub.add_parser(
        "server",
        help="the Task, `qualflow serve` + AIPerf and the harness ceiling side by side per point",
    )
    add_arguments(v, ServerBenchConfig)
    v.add_argument(
        "--brief",
        metavar="RESULT",
        help="print one line per point of a written server result and exit (nothing is run)",
    )
    v.set_defaults(func=_workflow_stage("qualflow.bench.server", "main_bench_server"))


def add_chaos_stage(sub) -> None:
    """The seeded chaos run (qualflow.chaos): qualify cycles with faults, checked after each."""
    from qualflow.chaos.config import ChaosConfig  # light: fields only
    from qualflow.configs import add_arguments

    s = sub.add_parser(
        "chaos",
        help="seeded chaos run: qualify cycles with faults injected at random moments, "
        "checked after each (a table; exit 1 if any check failed)",
    )
    add_arguments(s, ChaosConfig)
    s.set_defaults(func=_workflow_stage("qualflow.chaos.run", "main_chaos"))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="qualflow", description=__doc__)
    sub = p.add_subparsers(dest="stage", required=True)

    from qualflow.artifacts.bundle import add_build_args  # these modules are light at import
    from qualflow.artifacts.embedded import add_embedded_args
    from qualflow.artifacts.pin import add_pin_args
    from qualflow.correctness.cli import add_correctness_args

    s = sub.add_parser("embedded", help="write the embedded default checkpoint (offline)")
    add_embedded_args(s)
    s.set_defaults(func=_embedded)

    s = sub.add_parser("pin", help="pin a checkpoint (hub id at a commit sha, or a local dir)")
    add_pin_args(s)
    s.set_defaults(func=_pin)

    s = sub.add_parser("build", help="build the runtime bundle for a profile")
    add_build_args(s)
    s.set_defaults(func=_build)

    s = sub.add_parser(
        "correctness", help="family correctness: native Task vs the family's reference"
    )
    add_correctness_args(s)
    s.set_defaults(func=_correctness)

    add_bench_stages(sub)

    s = sub.add_parser(
        "serve", help="serve the bundle over the OpenAI Responses API (POST /v1/responses)"
    )
    from qualflow.server import add_serve_args  # light: the server itself is imported by _serve

    add_serve_args(s)
    s.set_defaults(func=_serve)

    s = sub.add_parser(
        "points", help="expand a model's workloads into its points and their SLOs (points.json)"
    )
    from qualflow.workload import add_points_args  # light: the points and their file only

    add_points_args(s)
    s.set_defaults(func=_workflow_stage("qualflow.workload", "main_points"))

    s = sub.add_parser(
        "model-settings", help="write a model's serving settings (endpoint or our bundle)"
    )
    from qualflow.workflow_config import add_model_settings_args  # light

    add_model_settings_args(s)
    s.set_defaults(func=_workflow_stage("qualflow.workflow_config", "main_model_settings"))

    add_workflow_stages(sub)
    add_compare_stages(sub)
    add_chaos_stage(sub)

    return p


def main(argv: list[str] | None = None) -> int:
    from qualflow.invocation import set_argv

    set_argv(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse already printed the usage error; give its status back
        return int(e.code or 0)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, OSError) as e:  # our typed errors subclass these
        print(f"qualflow {args.stage}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
