"""Building a bundle: a pinned checkpoint converted into the runtime's layout for one profile.

`build_bundle(pin_path, profile, out)` verifies every pinned hash, converts the HF weights with the
family (fused qkv / gate_up), casts them to the profile's dtype and writes:

  weights.safetensors       runtime layout, profile dtype, sorted keys
  config.json, generation_config.json, tokenizer.json, tokenizer_config.json   (copied)
  chat_template.jinja       the chat template (from tokenizer_config.json or chat_template.jinja)
  manifest.json             identity, precision, context limit, hashes of every file,
                            bundle_hash, and the `qualflow build` command line that wrote it
                            (`command`, not hashed)

bundle_hash (bundle_format.py) = sha256 over the sorted 'path sha256' lines of every bundle file
except the manifest, followed by the canonical JSON of the manifest's content fields
(HASHED_FIELDS). It depends only on content, never on where the checkpoint lay or when the bundle
was built, so building twice (on any machine) gives the same hash. `load_bundle` (bundle_load.py)
re-verifies every hash."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from qualflow.files import save_safetensors, sha256_file

from .bundle_format import (
    CHAT_TEMPLATE,
    COPIED,
    HASHED_FIELDS,
    MANIFEST,
    SCHEMA_VERSION,
    WEIGHTS,
    BundleError,
    compute_bundle_hash,
)
from .pin import read_pin, verify_pin
from .profiles import get_profile, torch_dtype


def _chat_template(src: Path, tok_cfg: dict) -> str:
    tmpl = tok_cfg.get("chat_template")
    if isinstance(tmpl, list):  # [{name, template}, ...]: take "default"
        tmpl = next((t["template"] for t in tmpl if t.get("name") == "default"), None)
    if not tmpl and (src / CHAT_TEMPLATE).is_file():
        tmpl = (src / CHAT_TEMPLATE).read_text(encoding="utf-8")
    if not tmpl:
        raise BundleError(
            f"checkpoint {src} has no chat template (tokenizer_config.json chat_template "
            f"or {CHAT_TEMPLATE})"
        )
    return tmpl


def _load_hf_weights(src: Path, pin_files: dict) -> dict:
    from safetensors.torch import load_file

    shards = sorted(p for p in pin_files if p.endswith(".safetensors") and "/" not in p)
    if not shards:
        raise BundleError(f"checkpoint {src} has no *.safetensors weights")
    state: dict = {}
    for s in shards:
        part = load_file(str(src / s), device="cpu")
        dup = set(part) & set(state)
        if dup:
            raise BundleError(f"{src / s}: tensor {sorted(dup)[0]!r} also in another shard")
        state.update(part)
    return state


@dataclass(frozen=True)
class _Sources:
    """What a build reads from the pinned checkpoint (every pinned hash verified first)."""

    pin_path: Path
    pin: dict
    src: Path  # the checkpoint directory
    config: dict  # config.json
    template: str  # the chat template
    generation_config: dict  # generation_config.json, or the stop tokens derived from config.json


def _check_out(out: Path, force: bool) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise BundleError(f"output {out} exists and is not empty; pass --force to replace it")


def _read_sources(pin_path: Path) -> _Sources:
    pin = read_pin(pin_path)
    src = verify_pin(pin)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        if name not in pin["files"]:
            raise BundleError(f"checkpoint {src} has no pinned {name}")
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    tok_cfg = json.loads((src / "tokenizer_config.json").read_text(encoding="utf-8"))
    template = _chat_template(src, tok_cfg)
    if "generation_config.json" in pin["files"]:
        gen_cfg = json.loads((src / "generation_config.json").read_text(encoding="utf-8"))
    else:  # derive the minimum the runtime needs (stop tokens) from config.json
        gen_cfg = {k: config[k] for k in ("bos_token_id", "eos_token_id") if k in config}
    return _Sources(pin_path, pin, src, config, template, gen_cfg)


def _native_weights(s: _Sources, dtype) -> dict:
    """The checkpoint's weights in the family's runtime layout, floating tensors cast to `dtype`."""
    from qualflow.families import get_family

    family = get_family(s.pin["family"])
    native = family.convert_weights(_load_hf_weights(s.src, s.pin["files"]), s.config)
    return {
        k: (v.to(dtype) if v.is_floating_point() else v).contiguous() for k, v in native.items()
    }


def _context_limit(s: _Sources, profile: str, prof: dict) -> int:
    """The model's max_position_embeddings, capped by the profile's context_cap."""
    limit = int(s.config.get("max_position_embeddings") or 0) or None
    cap = prof.get("context_cap")
    if cap:
        limit = min(limit, int(cap)) if limit else int(cap)
    if not limit:
        raise BundleError(
            f"{s.src / 'config.json'} has no max_position_embeddings and profile "
            f"{profile!r} no context_cap"
        )
    return limit


def _fresh_tmp(out: Path) -> Path:
    """An empty temporary sibling of `out`, renamed into place once the bundle is complete."""
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


def _copy_files(tmp: Path, s: _Sources) -> None:
    """The copied checkpoint files (a derived generation_config.json when none was pinned) and
    the chat template."""
    for name in COPIED:
        if name == "generation_config.json" and name not in s.pin["files"]:
            (tmp / name).write_text(
                json.dumps(s.generation_config, indent=2, sort_keys=True) + "\n", encoding="utf-8"
            )
        else:
            shutil.copyfile(s.src / name, tmp / name)
    (tmp / CHAT_TEMPLATE).write_text(s.template, encoding="utf-8")


def _manifest(
    tmp: Path, s: _Sources, profile: str, prof: dict, limit: int, command: str | None
) -> dict:
    """The manifest of the files in `tmp`, with its bundle_hash."""
    from qualflow import __version__

    files = {}
    for p in sorted(tmp.iterdir()):
        files[p.name] = {"sha256": sha256_file(p), "size": p.stat().st_size}
    ck = s.pin["checkpoint"]
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "family": s.pin["family"],
        "profile": profile,
        "precision": prof["dtype"],
        "context_limit": limit,
        "generation_config": s.generation_config,
        "builder": {"name": "qualflow", "version": __version__},
        "checkpoint_content_sha256": ck["content_sha256"],
        "chat_template_sha256": hashlib.sha256(s.template.encode("utf-8")).hexdigest(),
        "tokenizer_sha256": s.pin["tokenizer"]["sha256"],
        "checkpoint": {
            "id": ck["id"],
            "source": ck["source"],
            "revision": ck["revision"],
            "requested_revision": ck.get("requested_revision"),
            "path": str(s.src),
        },
        "pin": {"path": str(s.pin_path.resolve()), "sha256": sha256_file(s.pin_path)},
        "files": files,
        "hashed_fields": list(HASHED_FIELDS),
        "command": command,
    }
    manifest["bundle_hash"] = compute_bundle_hash(manifest)
    return manifest


def _move_into_place(tmp: Path, out: Path) -> None:
    if out.exists():
        if out.is_dir():
            shutil.rmtree(out)
        else:
            out.unlink()
    os.replace(tmp, out)


def build_bundle(
    pin_path: str | os.PathLike,
    profile: str,
    out: str | os.PathLike,
    force: bool = False,
    command: str | None = None,
) -> dict:
    """Build the bundle; returns its manifest. The output is written to a temporary sibling
    directory and renamed into place, so a failed build leaves no half bundle. `command`: the
    command line that builds it, recorded in the manifest (None in-process)."""
    prof = get_profile(profile)
    dtype = torch_dtype(prof["dtype"])
    out = Path(out)
    _check_out(out, force)
    s = _read_sources(Path(pin_path))
    native = _native_weights(s, dtype)
    limit = _context_limit(s, profile, prof)
    tmp = _fresh_tmp(out)
    try:
        save_safetensors(native, tmp / WEIGHTS, metadata={"format": "pt"})
        del native
        _copy_files(tmp, s)
        manifest = _manifest(tmp, s, profile, prof, limit, command)
        (tmp / MANIFEST).write_text(
            json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        _move_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


# ------------------------------------------------------------------------------------------ cli


def add_build_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pin", required=True, help="pin.json from `qualflow pin`")
    p.add_argument(
        "--profile", default="fp16", help="profile name (see qualflow/artifacts/profiles.yaml)"
    )
    p.add_argument("--out", required=True, help="bundle directory")
    p.add_argument("--force", action="store_true", help="replace an existing non-empty output")


def main_build(args: argparse.Namespace) -> int:
    from qualflow.invocation import current_command

    m = build_bundle(
        args.pin,
        args.profile,
        args.out,
        force=getattr(args, "force", False),
        command=current_command(),
    )
    print(
        f"built {args.profile} bundle {args.out} ({m['family']}, {m['precision']}, "
        f"context {m['context_limit']}) bundle_hash={m['bundle_hash']}"
    )
    return 0
