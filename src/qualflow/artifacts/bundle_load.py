"""Loading a bundle: `verify_bundle` re-hashes every file against manifest.json and recomputes the
bundle hash; `load_bundle` returns the Bundle (config, tokenizer, chat template, weights on demand).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from qualflow.files import load_json, sha256_file

from .bundle_format import (
    CHAT_TEMPLATE,
    MANIFEST,
    SCHEMA_VERSION,
    WEIGHTS,
    BundleError,
    BundleIntegrityError,
    compute_bundle_hash,
)


@dataclass
class Bundle:
    path: Path
    manifest: dict
    config: dict
    generation_config: dict
    tokenizer: object  # tokenizers.Tokenizer
    chat_template: str

    @property
    def bundle_hash(self) -> str:
        return self.manifest["bundle_hash"]

    def weights(self, device: str = "cpu") -> dict:
        from safetensors.torch import load_file

        return load_file(str(self.path / WEIGHTS), device=str(device))


def _read_manifest(path: Path) -> dict:
    mpath = path / MANIFEST
    if not mpath.is_file():
        raise BundleError(f"not a bundle: {mpath} not found")
    manifest = load_json(mpath, BundleIntegrityError)
    if not isinstance(manifest, dict) or manifest.get("schema_version") != SCHEMA_VERSION:
        raise BundleError(
            f"{mpath}: unsupported bundle schema_version "
            f"{manifest.get('schema_version') if isinstance(manifest, dict) else None!r}"
        )
    return manifest


def verify_bundle(path: str | os.PathLike) -> dict:
    """Re-hash every bundle file against manifest.json and recompute the bundle hash; returns the
    manifest. Raises BundleIntegrityError naming the offending file."""
    path = Path(path)
    mpath = path / MANIFEST
    manifest = _read_manifest(path)
    for rel, want in sorted(manifest["files"].items()):
        p = path / rel
        if not p.is_file():
            raise BundleIntegrityError(f"bundle file is missing: {p}")
        if p.stat().st_size != want["size"] or sha256_file(p) != want["sha256"]:
            raise BundleIntegrityError(
                f"bundle file was modified: {p} (sha256 differs from {MANIFEST})"
            )
    if compute_bundle_hash(manifest) != manifest.get("bundle_hash"):
        raise BundleIntegrityError(f"{mpath}: bundle_hash does not match the manifest's content")
    return manifest


def load_bundle(path: str | os.PathLike, verify: bool = True) -> Bundle:
    from tokenizers import Tokenizer

    path = Path(path)
    manifest = verify_bundle(path) if verify else _read_manifest(path)
    return Bundle(
        path=path,
        manifest=manifest,
        config=json.loads((path / "config.json").read_text(encoding="utf-8")),
        generation_config=json.loads((path / "generation_config.json").read_text(encoding="utf-8")),
        tokenizer=Tokenizer.from_file(str(path / "tokenizer.json")),
        chat_template=(path / CHAT_TEMPLATE).read_text(encoding="utf-8"),
    )
