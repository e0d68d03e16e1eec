"""A bundle's format: its file names, the manifest fields covered by bundle_hash, the hash itself
and the errors a bundle raises."""

from __future__ import annotations

import hashlib
import json

from qualflow.files import hash_lines

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
WEIGHTS = "weights.safetensors"
CHAT_TEMPLATE = "chat_template.jinja"
COPIED = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")
# Manifest fields covered by bundle_hash (besides the files). Paths and pin file hashes are not:
# they say where things lay, not what the bundle is.
HASHED_FIELDS = (
    "schema_version",
    "family",
    "profile",
    "precision",
    "context_limit",
    "generation_config",
    "builder",
    "checkpoint_content_sha256",
    "chat_template_sha256",
    "tokenizer_sha256",
)


class BundleError(ValueError):
    """A bundle cannot be built or loaded. The message names the file involved."""


class BundleIntegrityError(BundleError):
    """A bundle file is missing or its sha256 differs from the manifest."""


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def compute_bundle_hash(manifest: dict) -> str:
    h = hashlib.sha256()
    h.update(bytes.fromhex(hash_lines(manifest["files"])))
    h.update(_canonical({k: manifest.get(k) for k in HASHED_FIELDS}).encode())
    return h.hexdigest()
