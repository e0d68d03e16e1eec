"""`qualflow embedded`: write the embedded default checkpoint, the synthetic checkpoint of a family
(qwen3 unless told otherwise), offline and byte-for-byte reproducible."""

from __future__ import annotations

import argparse

from qualflow.families import get_family

DEFAULT_FAMILY = "qwen3"


def add_embedded_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="output directory for the checkpoint")
    p.add_argument(
        "--family", default=DEFAULT_FAMILY, help="model family whose synthetic checkpoint to write"
    )
    p.add_argument(
        "--preset",
        default="tiny",
        help="model size (default: tiny; qwen3-0.6b is the real Qwen3-0.6B shape)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="weight seed (default: the embedded default's); another seed gives other weights",
    )


def main_embedded(args: argparse.Namespace) -> int:
    family = get_family(args.family)
    if args.preset not in family.synthetic_presets:
        raise ValueError(
            f"unknown preset {args.preset!r} for family {args.family}; "
            f"known: {', '.join(family.synthetic_presets)}"
        )
    out = family.write_synthetic(args.out, args.preset, args.seed)
    print(f"wrote embedded {args.preset} checkpoint to {out}")
    return 0
