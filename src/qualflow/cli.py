"""`qualflow <stage>`: every workflow stage is runnable on its own. Handlers import lazily."""
from __future__ import annotations

import argparse
import sys


def _embedded(a):
    from qualflow.embedded import main_embedded
    return main_embedded(a)


def _pin(a):
    from qualflow.checkpoint import main_pin
    return main_pin(a)


def _build(a):
    from qualflow.bundle import main_build
    return main_build(a)


def _correctness(a):
    from qualflow.correctness import main_correctness
    return main_correctness(a)


def _serve(a):
    from qualflow.server import main_serve
    return main_serve(a)


def _bench_task(a):
    from qualflow.runtime.bench import main_bench_task
    return main_bench_task(a)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="qualflow", description=__doc__)
    sub = p.add_subparsers(dest="stage", required=True)

    s = sub.add_parser("embedded", help="write the embedded default checkpoint (offline)")
    s.add_argument("--out", required=True)
    s.add_argument("--preset", default="tiny")
    s.set_defaults(func=_embedded)

    s = sub.add_parser("pin", help="pin a checkpoint (hub id at a commit sha, or a local dir)")
    s.add_argument("--checkpoint", required=True)
    s.add_argument("--revision")
    s.add_argument("--allow-unpinned", action="store_true")
    s.add_argument("--out", required=True)
    s.set_defaults(func=_pin)

    s = sub.add_parser("build", help="build the runtime bundle for a profile")
    s.add_argument("--pin", required=True)
    s.add_argument("--profile", default="fp16")
    s.add_argument("--out", required=True)
    s.add_argument("--force", action="store_true")
    s.set_defaults(func=_build)

    s = sub.add_parser("correctness", help="family correctness: native Task vs the family's reference")
    s.add_argument("--bundle", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--device", default="cpu")
    s.set_defaults(func=_correctness)

    s = sub.add_parser("bench-task", help="benchmark the Task API (prints figures)")
    s.add_argument("--bundle", required=True)
    s.add_argument("--device", default="cpu")
    s.add_argument("--concurrency", type=int, default=1)
    s.add_argument("--input-len", type=int, default=128)
    s.add_argument("--output-len", type=int, default=128)
    s.add_argument("--requests", type=int, default=0, help="total requests (default: 2 x concurrency)")
    s.add_argument("--max-batch", type=int, default=0, help="engine batch slots (default: concurrency)")
    s.add_argument("--eager", action="store_true", help="no CUDA graphs")
    s.add_argument("--json", help="also write the figures as JSON here")
    s.set_defaults(func=_bench_task)

    s = sub.add_parser("serve", help="serve the bundle over the OpenAI Responses API (POST /v1/responses)")
    from qualflow.server import add_serve_args  # light: the server itself is imported by _serve
    add_serve_args(s)
    s.set_defaults(func=_serve)

    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, OSError) as e:  # our typed errors subclass these
        print(f"qualflow {args.stage}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
