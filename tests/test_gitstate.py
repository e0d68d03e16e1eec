"""The software key: clean commit, a dirty tree's own key per change, and the build-time stamp of a
non-editable install."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from qualflow.gitstate import STAMP, key_suffix, source_state, write_stamp

ROOT = Path(__file__).resolve().parents[1]


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / "repo"
    (r / "pkg").mkdir(parents=True)
    (r / "pkg" / "a.py").write_text("x = 1\n")
    _git(r, "init", "-q")
    _git(r, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    _git(r, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    return r


def test_clean_tree_is_the_commit(repo):
    s = source_state(repo / "pkg")
    assert s["source"] == "git" and not s["git_dirty"] and key_suffix(s) == f"+g{s['git_sha'][:10]}"


def test_a_dirty_tree_gets_its_own_key_per_change(repo):
    clean = key_suffix(source_state(repo / "pkg"))
    (repo / "pkg" / "a.py").write_text("x = 2\n")
    one = key_suffix(source_state(repo / "pkg"))
    (repo / "pkg" / "a.py").write_text("x = 3\n")
    two = key_suffix(source_state(repo / "pkg"))
    assert one.startswith(clean + ".dirty.") and two.startswith(clean + ".dirty.") and one != two
    (repo / "pkg" / "a.py").write_text("x = 1\n")
    (repo / "pkg" / "new.py").write_text("y = 1\n")  # untracked code counts too
    assert key_suffix(source_state(repo / "pkg")).startswith(clean + ".dirty.")


def test_a_build_stamp_names_the_commit_outside_git(repo, tmp_path):
    state = source_state(repo)
    installed = tmp_path / "site-packages" / "pkg"
    installed.mkdir(parents=True)
    assert write_stamp(installed, repo) == installed / STAMP
    s = source_state(installed)
    assert s["source"] == "build-stamp" and s["git_sha"] == state["git_sha"]
    assert key_suffix(s) == f"+g{state['git_sha'][:10]}"
    assert key_suffix(source_state(tmp_path / "site-packages")) == "+nogit"


@pytest.mark.slow
def test_the_wheel_carries_the_stamp(tmp_path):
    """A real build through the project's backend: the wheel holds the commit it was built from."""
    src = tmp_path / "src"
    subprocess.run(
        ["git", "clone", "-q", str(ROOT), str(src)], check=True, capture_output=True, timeout=120
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(src),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    wheel = next((tmp_path / "dist").glob("qualflow-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        stamp = json.loads(z.read(f"qualflow/{STAMP}"))
    assert (
        stamp["git_sha"] == source_state(src / "src" / "qualflow")["git_sha"]
        and stamp["git_dirty"] is False
    )
    assert not (src / "src" / "qualflow" / STAMP).exists()  # the source tree stays clean
