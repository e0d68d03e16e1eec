"""Pinning: resolve a checkpoint to an immutable identity and record the sha256 of every file.

A checkpoint is either a Hugging Face hub repo id at a full 40-hex commit sha (a branch or tag is
refused unless `allow_unpinned`, which resolves it and records both), downloaded with
`huggingface_hub.snapshot_download`, or a local directory (recorded by absolute path).

pin.json (schema_version 1):
  checkpoint: {id, source: hub|local, revision, requested_revision, content_sha256}
  path: local directory holding the files
  family: from config.json model_type
  files: {relative path: {sha256, size}} for every file (sorted; hidden files/dirs skipped)
  tokenizer: {sha256, files}      identity of tokenizer.json + tokenizer_config.json
  generation_config: {sha256, content}   (null sha when the checkpoint has none)
  config_sha256
  command         the `qualflow pin` command line that wrote it (absent when pinned in-process)
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

from qualflow.files import hash_lines, hash_tree, load_json, sha256_file

SCHEMA_VERSION = 1
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
HUB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


class CheckpointError(ValueError):
    """Any problem pinning or verifying a checkpoint. The message names the path involved."""


class CheckpointNotFound(CheckpointError):
    pass


class UnpinnedRevision(CheckpointError):
    pass


class PinMismatch(CheckpointError):
    """A pinned file changed, vanished, or the pin itself is unreadable."""


# ------------------------------------------------------------------------------------------ hub


def _hub_resolve(repo_id: str, revision: str | None) -> str:
    import huggingface_hub

    try:
        info = huggingface_hub.HfApi().model_info(repo_id, revision=revision)
    except Exception as e:  # the hub client's own errors (network, auth, not found) at its boundary
        raise CheckpointError(
            f"could not resolve hub checkpoint {repo_id}@{revision}: {type(e).__name__}: {e}"
        ) from e
    sha = getattr(info, "sha", None)
    if not sha or not SHA_RE.match(sha):
        raise CheckpointError(
            f"hub did not resolve {repo_id}@{revision} to a commit sha (got {sha!r})"
        )
    return sha


def _hub_download(repo_id: str, sha: str) -> str:
    import huggingface_hub

    try:
        return huggingface_hub.snapshot_download(repo_id=repo_id, revision=sha)
    except Exception as e:  # the hub client's own errors (network, auth, not found) at its boundary
        raise CheckpointError(
            f"could not download hub checkpoint {repo_id}@{sha}: {type(e).__name__}: {e}"
        ) from e


def is_local_ref(ref: str) -> bool:
    return (
        os.path.isabs(ref)
        or ref.startswith(("./", "../", "~"))
        or os.path.exists(ref)
        or not HUB_ID_RE.match(ref)
    )


# ------------------------------------------------------------------------------------------ pin


def pin_checkpoint(ref: str, revision: str | None = None, allow_unpinned: bool = False) -> dict:
    """Resolve `ref` (hub id or local dir) and return the pin record (see module doc)."""
    if is_local_ref(ref):
        if revision:
            raise CheckpointError(
                f"--revision {revision!r} given for local checkpoint {ref!r}; "
                "revisions only apply to hub ids"
            )
        path = Path(ref).expanduser().resolve()
        if not path.is_dir():
            raise CheckpointNotFound(f"checkpoint directory not found: {path}")
        ident = {"id": str(path), "source": "local", "revision": None, "requested_revision": None}
    else:
        requested = revision
        if revision is not None and SHA_RE.match(revision):
            sha = revision
        elif allow_unpinned:
            sha = _hub_resolve(ref, revision)
        else:
            raise UnpinnedRevision(
                f"hub checkpoint {ref!r} needs --revision with a full 40-hex commit sha "
                f"(got {revision!r}); a branch or tag moves. "
                f"Pass --allow-unpinned to resolve it now "
                f"(no local directory {os.path.abspath(ref)} exists either)"
            )
        path = Path(_hub_download(ref, sha)).resolve()
        if not path.is_dir():
            raise CheckpointNotFound(f"download of {ref}@{sha} gave no directory: {path}")
        ident = {"id": ref, "source": "hub", "revision": sha, "requested_revision": requested}
    return describe_dir(path, ident)


def describe_dir(path: Path, ident: dict) -> dict:
    from qualflow.families import UnknownFamily, family_of_config

    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise CheckpointError(f"checkpoint {path} has no config.json")
    config = load_json(cfg_path, CheckpointError)
    if not isinstance(config, dict):
        raise CheckpointError(f"{cfg_path} is not a JSON object")
    try:
        family = family_of_config(config)
    except UnknownFamily as e:
        raise CheckpointError(f"{cfg_path}: {e}") from None
    for name in TOKENIZER_FILES:
        if not (path / name).is_file():
            raise CheckpointError(f"checkpoint {path} has no {name}")
    files = hash_tree(path)
    tok = {n: files[n]["sha256"] for n in TOKENIZER_FILES}
    gen_path = path / "generation_config.json"
    gen = {"sha256": None, "content": None}
    if gen_path.is_file():
        gen = {
            "sha256": files["generation_config.json"]["sha256"],
            "content": json.loads(gen_path.read_text(encoding="utf-8")),
        }
    return {
        "schema_version": SCHEMA_VERSION,
        "checkpoint": {**ident, "content_sha256": hash_lines(files)},
        "path": str(path),
        "family": family,
        "config_sha256": files["config.json"]["sha256"],
        "tokenizer": {
            "sha256": hash_lines({n: {"sha256": s} for n, s in tok.items()}),
            "files": tok,
        },
        "generation_config": gen,
        "files": files,
    }


def write_pin(pin: dict, out: str | os.PathLike) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(pin, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out


def read_pin(path: str | os.PathLike) -> dict:
    path = Path(path)
    if not path.is_file():
        raise PinMismatch(f"pin file not found: {path}")
    pin = load_json(path, PinMismatch)
    if not isinstance(pin, dict) or pin.get("schema_version") != SCHEMA_VERSION:
        raise PinMismatch(
            f"{path}: unsupported pin schema_version "
            f"{pin.get('schema_version') if isinstance(pin, dict) else None!r}; "
            f"expected {SCHEMA_VERSION}"
        )
    for key in ("path", "files", "family", "checkpoint"):
        if key not in pin:
            raise PinMismatch(f"{path}: pin lacks {key!r}")
    return pin


def verify_pin(pin: dict) -> Path:
    """Re-hash every pinned file; raise PinMismatch naming the first changed or missing file."""
    root = Path(pin["path"])
    if not root.is_dir():
        raise PinMismatch(f"pinned checkpoint directory is gone: {root}")
    for rel, want in sorted(pin["files"].items()):
        p = root / rel
        if not p.is_file():
            raise PinMismatch(f"pinned file is missing: {p}")
        if p.stat().st_size != want["size"] or sha256_file(p) != want["sha256"]:
            raise PinMismatch(
                f"pinned file changed since pinning: {p} (sha256 no longer "
                f"{want['sha256'][:12]}...)"
            )
    return root


# ------------------------------------------------------------------------------------------ cli


def add_pin_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="hub repo id or local directory")
    p.add_argument("--revision", help="hub commit sha (40 hex)")
    p.add_argument(
        "--allow-unpinned",
        action="store_true",
        help="accept a branch/tag (or no revision) and record the sha it resolves to",
    )
    p.add_argument("--out", required=True, help="pin.json to write")


def main_pin(args: argparse.Namespace) -> int:
    from qualflow.invocation import current_command

    pin = {
        **pin_checkpoint(args.checkpoint, args.revision, getattr(args, "allow_unpinned", False)),
        "command": current_command(),
    }
    out = write_pin(pin, args.out)
    c = pin["checkpoint"]
    print(
        f"pinned {c['id']}"
        + (f"@{c['revision']}" if c["revision"] else "")
        + f" ({pin['family']}, {len(pin['files'])} files) -> {out}"
    )
    return 0
