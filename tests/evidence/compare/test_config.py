"""`qualflow compare`'s flags are CompareOptions' fields: one default each."""

from __future__ import annotations

from qualflow.cli import build_parser
from qualflow.configs import from_args
from qualflow.evidence.compare.config import CompareOptions


def _opts(*flags: str) -> CompareOptions:
    return from_args(
        CompareOptions,
        build_parser().parse_args(["compare", "--base", "v1", "--head", "v2", *flags]),
    )


def test_no_flags_give_the_default_options():
    assert _opts() == CompareOptions()


def test_flags_set_the_options():
    assert _opts(
        "--force",
        "--noise-rel",
        "0.1",
        "--noise-abs-ms",
        "2",
        "--confidence",
        "0.9",
        "--resamples",
        "300",
    ) == CompareOptions(force=True, noise_rel=0.1, noise_abs_ms=2.0, confidence=0.9, resamples=300)
    assert not _opts("--force", "--no-force").floor_configured
