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
    from qualflow.correctness.cli import main_correctness
    return main_correctness(a)


def _serve(a):
    from qualflow.server import main_serve
    return main_serve(a)


def _bench_task(a):
    from qualflow.runtime.bench import main_bench_task
    return main_bench_task(a)


def _workflow_stage(module: str, func: str):
    """Lazy handler for the workflow stages (session, warmup, protocol, aiperf, join, report, status)."""
    def run(a):
        import importlib
        return getattr(importlib.import_module(module), func)(a)
    return run


def add_workflow_stages(sub) -> None:
    """Subcommands of the qualify DAG: the serving session and its client-side stages, AIPerf, the
    evidence join and the report."""
    s = sub.add_parser("session", help="serving session: start server, warm-up, protocol, AIPerf points, stop")
    s.add_argument("--bundle", help="our server on this bundle (or --endpoint)")
    s.add_argument("--endpoint", help="JSON {url, model, api_key_env?, tokenizer?, launch?}: qualify that endpoint")
    s.add_argument("--checkpoint", help="pinned checkpoint dir of an endpoint (tokenizer, {checkpoint} in launch)")
    s.add_argument("--pin", help="pin.json of the checkpoint an endpoint claims to serve (instead of --checkpoint)")
    s.add_argument("--no-request-extensions", action="store_true",
                   help="send standard Responses fields only (no ignore_eos / min_tokens)")
    s.add_argument("--out", required=True, help="session directory")
    s.add_argument("--points", required=True, help="JSON list of workload points (or a file holding it)")
    s.add_argument("--device", default="cpu")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=0, help="0: pick a free port")
    s.add_argument("--model-name", default="qualflow")
    s.add_argument("--max-batch", type=int, default=0)
    s.add_argument("--max-context", type=int, default=0, help="server --max-context (0: the server's default)")
    s.add_argument("--cpu-threads", type=int, default=0, help="server --cpu-threads (0: torch's default)")
    s.add_argument("--startup-timeout", type=float, default=600.0)
    s.add_argument("--warmup-requests", type=int, default=4)
    s.add_argument("--warmup-max-tokens", type=int, default=16)
    s.add_argument("--aiperf-workers", type=int, default=1)
    s.add_argument("--aiperf-record-processors", type=int, default=1)
    s.add_argument("--aiperf-timeout", type=float, default=3600.0)
    s.add_argument("--no-protocol", action="store_true")
    s.add_argument("--record-failures", action="store_true",
                   help="a failed stage is recorded in session.json and every output is written; exit 0")
    s.add_argument("--allow-unpinned-client", action="store_true",
                   help="run with an aiperf/openai that is not the pinned version (caps the status, with the reason)")
    s.add_argument("--run-name", nargs=2, metavar=("MODEL", "PROFILE"),
                   help="name the evidence run id (MODEL.PROFILE.<start time>), recorded in session.json")
    s.add_argument("--archive-dir", help="also keep the session's raw artifacts under ARCHIVE_DIR/<run id>/")
    s.set_defaults(func=_workflow_stage("qualflow.session.run", "main_session"))

    s = sub.add_parser("endpoint-correctness",
                       help="endpoint correctness: an endpoint's greedy output against the family reference")
    s.add_argument("--endpoint", required=True, help="JSON {url, model, api_key_env?, tokenizer?, launch?}")
    s.add_argument("--checkpoint", help="the pinned checkpoint dir the endpoint claims to serve")
    s.add_argument("--pin", help="pin.json of that checkpoint (its files are re-hashed first)")
    s.add_argument("--out", required=True)
    s.add_argument("--startup-timeout", type=float, default=600.0)
    s.add_argument("--record-failures", action="store_true",
                   help="write failed cases (or a run that could not complete) to --out and exit 0")
    s.set_defaults(func=_workflow_stage("qualflow.session.endpoint", "main_endpoint_correctness"))

    s = sub.add_parser("warmup", help="send fixed warm-up requests to a running server, record them")
    s.add_argument("--url", required=True)
    s.add_argument("--model", default="qualflow")
    s.add_argument("--requests", type=int, default=4)
    s.add_argument("--max-output-tokens", type=int, default=16)
    s.add_argument("--no-stream", action="store_true")
    s.add_argument("--out", required=True)
    s.set_defaults(func=_workflow_stage("qualflow.session.warmup", "main_warmup"))

    s = sub.add_parser("protocol", help="Responses conformance checks with the openai SDK against a server")
    s.add_argument("--url", required=True)
    s.add_argument("--model", default="qualflow")
    s.add_argument("--out", required=True)
    s.set_defaults(func=_workflow_stage("qualflow.session.conformance", "main_protocol"))

    s = sub.add_parser("aiperf", help="run one pinned AIPerf point against a running server and judge it")
    s.add_argument("--url", required=True)
    s.add_argument("--model", default="qualflow")
    s.add_argument("--tokenizer", required=True, help="local tokenizer dir (the bundle dir)")
    s.add_argument("--out", required=True, help="point directory (AIPerf artifacts go to OUT/aiperf)")
    s.add_argument("--point", help="JSON of the workload point (overrides the flags below)")
    s.add_argument("--point-id", default="point")
    s.add_argument("--concurrency", type=int, default=1)
    s.add_argument("--isl", type=int, default=32)
    s.add_argument("--osl", type=int, default=16)
    s.add_argument("--request-count", type=int, default=16)
    s.add_argument("--warmup-request-count", type=int, default=4)
    s.add_argument("--seed", type=int, default=42)
    s.add_argument("--print-command", action="store_true", help="print the command and exit")
    s.set_defaults(func=_workflow_stage("qualflow.aiperf.cli", "main_aiperf"))

    s = sub.add_parser("join", help="join AIPerf and server records into the evidence tables")
    s.add_argument("--session", required=True)
    s.add_argument("--correctness", required=True)
    s.add_argument("--bundle", help="the bundle our server ran (absent for an endpoint)")
    s.add_argument("--pin", help="pin.json (absent for an endpoint that names no checkpoint)")
    s.add_argument("--model", required=True)
    s.add_argument("--profile", required=True)
    s.add_argument("--software-key", required=True)
    s.add_argument("--points", required=True)
    s.add_argument("--device")
    s.add_argument("--thresholds-version")
    s.add_argument("--commands", help="JSON of the stage commands, recorded in runs")
    s.add_argument("--slo", help="JSON {point_id: SLO block} (qualflow.evidence.slo)")
    s.add_argument("--out", required=True)
    s.set_defaults(func=_workflow_stage("qualflow.evidence.join", "main_join"))

    add_report_stages(sub)

    s = sub.add_parser("provenance", help="print software/hardware provenance and the software key")
    s.add_argument("--out")
    s.add_argument("--no-torch", action="store_true")
    s.add_argument("--key", action="store_true", help="print only the software key")
    s.add_argument("--workflow", action="store_true",
                   help="print the software key and the package versions the workflow's rules depend on (JSON)")
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
    from qualflow.evidence.schema import STATUS_LADDER  # a light module: names and descriptions only
    s.add_argument("--require", choices=STATUS_LADDER)
    s.set_defaults(func=_workflow_stage("qualflow.report.page", "main_status"))


def add_compare_stages(sub) -> None:
    """The versioned evidence store and compare."""
    s = sub.add_parser("evidence", help="the versioned evidence store")
    esub = s.add_subparsers(dest="evidence_cmd", required=True)
    e = esub.add_parser("list", help="versions, runs, models, profiles, workload points and status")
    e.add_argument("--root", default="results/evidence")
    e.set_defaults(func=_workflow_stage("qualflow.evidence.store", "main_evidence_list"))

    s = sub.add_parser("compare", help="compare two software versions' (or runs') evidence")
    s.add_argument("--base", required=True, help="VERSION, RUN_ID, VERSION@RUN_ID or an evidence dir")
    s.add_argument("--head", required=True, help="VERSION, RUN_ID, VERSION@RUN_ID or an evidence dir")
    s.add_argument("--root", default="results/evidence")
    s.add_argument("--out", help="output dir (default results/compare/<base>__vs__<head>)")
    from qualflow.configs import add_arguments
    from qualflow.evidence.compare.config import NOT_ON_CLI, CompareOptions  # light: fields only
    add_arguments(s, CompareOptions, skip=NOT_ON_CLI)
    s.add_argument("--print-out-dir", action="store_true", help="print the default output dir and exit")
    s.set_defaults(func=_workflow_stage("qualflow.report.compare", "main_compare"))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="qualflow", description=__doc__)
    sub = p.add_subparsers(dest="stage", required=True)

    from qualflow.artifacts.bundle import add_build_args  # these modules are light at import
    from qualflow.artifacts.pin import add_pin_args
    from qualflow.artifacts.embedded import add_embedded_args

    s = sub.add_parser("embedded", help="write the embedded default checkpoint (offline)")
    add_embedded_args(s)
    s.set_defaults(func=_embedded)

    s = sub.add_parser("pin", help="pin a checkpoint (hub id at a commit sha, or a local dir)")
    add_pin_args(s)
    s.set_defaults(func=_pin)

    s = sub.add_parser("build", help="build the runtime bundle for a profile")
    add_build_args(s)
    s.set_defaults(func=_build)

    s = sub.add_parser("correctness", help="family correctness: native Task vs the family's reference")
    s.add_argument("--bundle", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--device", default="cpu")
    s.add_argument("--record-failures", action="store_true",
                   help="write failed criteria (or a run that could not complete) to --out and exit 0")
    s.set_defaults(func=_correctness)

    s = sub.add_parser("bench-task", help="benchmark the Task API (prints figures)")
    from qualflow.runtime.bench import add_bench_args  # light: the Task is imported by _bench_task
    add_bench_args(s)
    s.set_defaults(func=_bench_task)

    s = sub.add_parser("serve", help="serve the bundle over the OpenAI Responses API (POST /v1/responses)")
    from qualflow.server import add_serve_args  # light: the server itself is imported by _serve
    add_serve_args(s)
    s.set_defaults(func=_serve)

    s = sub.add_parser("points", help="expand a model's workloads into its points and their SLOs (points.json)")
    from qualflow.workload import add_points_args  # light: the points and their file only
    add_points_args(s)
    s.set_defaults(func=_workflow_stage("qualflow.workload", "main_points"))

    add_workflow_stages(sub)
    add_compare_stages(sub)

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
