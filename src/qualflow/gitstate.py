"""The state of the source tree a qualflow runs from: git commit, whether the tree is dirty and a
hash of what is uncommitted, or the stamp a built wheel carries. A leaf module (it imports nothing
from qualflow), used at run time by provenance and at build time by the build backend.

The software key evidence is filed under comes from here: `<version>+g<sha10>` for a clean tree,
`<version>+g<sha10>.dirty.<diff12>` for uncommitted code (each distinct change its own key, so it
never files evidence under the clean commit), and the build-time stamp for a non-editable
install."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

STAMP = "_build_info.json"  # written into the package by the build backend; absent in a source tree


def _git(*args: str, cwd: Path) -> str | None:
    try:
        r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20)
        return r.stdout if r.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _diff_hash(cwd: Path) -> str | None:
    """sha256 over the uncommitted change: the diff of tracked files against HEAD, plus every
    untracked file git does not ignore (path and content); None for a clean tree."""
    diff = subprocess.run(
        ["git", "diff", "HEAD", "--binary"], cwd=cwd, capture_output=True, timeout=60
    ).stdout
    untracked = sorted(
        (_git("ls-files", "--others", "--exclude-standard", "-z", cwd=cwd) or "").split("\0")
    )
    top = Path((_git("rev-parse", "--show-toplevel", cwd=cwd) or str(cwd)).strip())
    if not diff and not any(untracked):
        return None
    h = hashlib.sha256(diff)
    for rel in filter(None, untracked):
        p = top / rel
        h.update(rel.encode() + b"\0")
        if p.is_file():
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def source_state(package_dir: str | Path) -> dict:
    """{git_sha, git_dirty, diff_sha256, source}: from the git checkout holding `package_dir`, else
    from the build stamp inside it (a non-editable install), else unknown (source: none)."""
    package_dir = Path(package_dir)
    stamp = package_dir / STAMP
    if stamp.is_file():
        return {**json.loads(stamp.read_text()), "source": "build-stamp"}
    sha = (_git("rev-parse", "HEAD", cwd=package_dir) or "").strip()
    if not sha:
        return {"git_sha": None, "git_dirty": None, "diff_sha256": None, "source": "none"}
    diff = _diff_hash(package_dir)
    return {"git_sha": sha, "git_dirty": diff is not None, "diff_sha256": diff, "source": "git"}


def key_suffix(state: dict) -> str:
    if not state.get("git_sha"):
        return "+nogit"
    suffix = f"+g{state['git_sha'][:10]}"
    if state.get("git_dirty"):
        suffix += f".dirty.{(state.get('diff_sha256') or 'unknown')[:12]}"
    return suffix


def write_stamp(package_dir: str | Path, repo_dir: str | Path) -> Path | None:
    """At build time: record the source state of `repo_dir` in the package (None outside git, where
    an sdist's own stamp, if any, is kept)."""
    state = source_state(repo_dir) if not (Path(package_dir) / STAMP).is_file() else None
    if state is None or state["source"] != "git":
        return None
    out = Path(package_dir) / STAMP
    out.write_text(
        json.dumps({k: state[k] for k in ("git_sha", "git_dirty", "diff_sha256")}, indent=2) + "\n"
    )
    return out
