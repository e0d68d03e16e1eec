"""The session package's stages on the command line: `qualflow session` (its flags generated from
SessionConfig), and the stages it runs that are runnable on their own (`endpoint-correctness`,
`warmup`, `protocol`, `provenance`). Light at import: handlers import their modules when called."""

from __future__ import annotations

import argparse

from qualflow.configs import add_arguments, from_args

from .config import SessionConfig


def add_session_args(s: argparse.ArgumentParser) -> None:
    add_arguments(s, SessionConfig)


def main_session(a: argparse.Namespace) -> int:
    from .run import run_session

    return run_session(with_model_settings(from_args(SessionConfig, a)))


def with_model_settings(cfg: SessionConfig) -> SessionConfig:
    """The config with what its --model-settings decide: the endpoint (none: our server on the
    bundle) and the request extensions. Given alone: not beside
    --endpoint/--no-request-extensions."""
    if cfg.model_settings is None:
        return cfg
    if cfg.endpoint is not None or not cfg.request_extensions:
        raise ValueError(
            "--model-settings decides the endpoint and the request extensions: give "
            "--endpoint / --no-request-extensions without it"
        )
    import json
    from dataclasses import replace

    from qualflow.workflow_config import read_serving_settings

    s = read_serving_settings(cfg.model_settings)
    endpoint = None if s["endpoint"] is None else json.dumps(s["endpoint"], sort_keys=True)
    return replace(cfg, endpoint=endpoint, request_extensions=s["request_extensions"])


def add_endpoint_correctness_args(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--endpoint", required=True, help="JSON {url, model, api_key_env?, tokenizer?, launch?}"
    )
    s.add_argument("--checkpoint", help="the pinned checkpoint dir the endpoint claims to serve")
    s.add_argument("--pin", help="pin.json of that checkpoint (its files are re-hashed first)")
    s.add_argument("--out", required=True)
    s.add_argument("--startup-timeout", type=float, default=600.0)
    s.add_argument(
        "--record-failures",
        action="store_true",
        help="write failed cases (or a run that could not complete) to --out and exit 0",
    )


def add_warmup_args(s: argparse.ArgumentParser) -> None:
    s.add_argument("--url", required=True)
    s.add_argument("--model", default="qualflow")
    s.add_argument("--requests", type=int, default=4)
    s.add_argument("--max-output-tokens", type=int, default=16)
    s.add_argument("--no-stream", action="store_true")
    s.add_argument("--out", required=True)


def add_protocol_args(s: argparse.ArgumentParser) -> None:
    s.add_argument("--url", required=True)
    s.add_argument("--model", default="qualflow")
    s.add_argument("--out", required=True)


def add_provenance_args(s: argparse.ArgumentParser) -> None:
    s.add_argument("--out")
    s.add_argument("--no-torch", action="store_true")
    s.add_argument("--key", action="store_true", help="print only the software key")
    s.add_argument(
        "--workflow",
        action="store_true",
        help="print the software key and the package versions the workflow's rules depend on "
        "(JSON)",
    )
