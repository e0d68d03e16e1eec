"""Shared fixtures: the embedded default checkpoint, its pin and its fp16 bundle (built once per
session, in-process, offline). The shared builders (tests/fixtures) assert too: pytest rewrites their
asserts as it does the tests'."""
from __future__ import annotations

import os

import pytest

pytest.register_assert_rewrite("fixtures")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def embedded_dir(tmp_path_factory):
    """Path of the embedded default (tiny) checkpoint."""
    from qualflow.families.qwen3.synthetic import write_embedded
    return write_embedded(tmp_path_factory.mktemp("embedded") / "checkpoint", "tiny")


@pytest.fixture(scope="session")
def pinned(embedded_dir, tmp_path_factory):
    """Path of pin.json for the embedded default."""
    from qualflow.artifacts.pin import pin_checkpoint, write_pin
    return write_pin(pin_checkpoint(str(embedded_dir)), tmp_path_factory.mktemp("pin") / "pin.json")


@pytest.fixture(scope="session")
def bundle_dir(pinned, tmp_path_factory):
    """Path of the fp16 bundle built from the embedded default."""
    from qualflow.artifacts.bundle import build_bundle
    out = tmp_path_factory.mktemp("bundle") / "fp16"
    build_bundle(pinned, "fp16", out)
    return out
