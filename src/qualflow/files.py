"""File hashing, stat fingerprints, JSON reading and safetensors writing: the I/O every phase
shares. A leaf module: it imports nothing from qualflow (and nothing heavy: the workflow's DAG
parse uses it)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(chunk):
            h.update(b)
    return h.hexdigest()


def hash_lines(files: dict[str, dict]) -> str:
    """sha256 over sorted 'path sha256' lines: the content identity of a set of files."""
    text = "".join(f"{p} {files[p]['sha256']}\n" for p in sorted(files))
    return hashlib.sha256(text.encode()).hexdigest()


def hash_tree(root: str | os.PathLike) -> dict[str, dict]:
    """{relative posix path: {sha256, size}} for every regular file under root (symlinks followed,
    hidden files and directories such as .cache/ skipped), sorted by path."""
    root = Path(root)
    out: dict[str, dict] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fn in sorted(filenames):
            if fn.startswith("."):
                continue
            p = Path(dirpath) / fn
            rel = p.relative_to(root).as_posix()
            out[rel] = {"sha256": sha256_file(p), "size": p.stat().st_size}
    return dict(sorted(out.items()))


def stat_tree(root: str | os.PathLike) -> dict[str, list[int]]:
    """{relative posix path: [size, mtime_ns]} of every regular file under root (the files hash_tree
    hashes: hidden ones, such as Snakemake's .snakemake_timestamp, skipped); {} if root is absent.
    Stat calls only, so cheap for GB-size files."""
    root = Path(root)
    out: dict[str, list[int]] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            p = Path(dirpath) / name
            if not name.startswith(".") and p.is_file():
                st = p.stat()
                out[p.relative_to(root).as_posix()] = [st.st_size, st.st_mtime_ns]
    return dict(sorted(out.items()))


def stat_fingerprint(root: str | os.PathLike) -> str:
    """One short hash of stat_tree(root), "absent" if root does not exist: changes whenever a file
    under root is added, removed, resized or rewritten (its mtime), without reading any file."""
    if not Path(root).exists():
        return "absent"
    text = "".join(f"{p} {s} {m}\n" for p, (s, m) in stat_tree(root).items())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_json(path: Path, error: type[Exception]):
    """Parse a JSON file; a file that is not JSON raises `error` naming it."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{path} is not valid JSON: {e}") from None


def save_safetensors(tensors: dict, path: str | os.PathLike, metadata: dict | None = None) -> None:
    """Deterministic safetensors: sorted keys, fixed metadata."""
    from safetensors.torch import save_file

    save_file(
        {k: tensors[k].contiguous() for k in sorted(tensors)},
        str(path),
        metadata=metadata or {"format": "pt"},
    )
