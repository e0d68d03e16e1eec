"""The build backend: setuptools, plus a stamp of the git state (commit, dirty, diff hash) written
into the package of a wheel or sdist, so a non-editable install knows the commit it was built from.
Editable installs get no stamp: they read git at run time."""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403 - every hook setuptools provides

ROOT = Path(__file__).resolve().parent
PACKAGE = ROOT / "src" / "qualflow"


def _stamped(build):
    def hook(*args, **kwargs):
        sys.path.insert(0, str(ROOT / "src"))
        try:
            from qualflow.gitstate import write_stamp
        finally:
            sys.path.pop(0)
        stamp = write_stamp(PACKAGE, ROOT)
        try:
            return build(*args, **kwargs)
        finally:
            if stamp is not None:
                stamp.unlink()  # the source tree stays clean; the stamp lives in what was built

    return hook


build_wheel = _stamped(_setuptools.build_wheel)
build_sdist = _stamped(_setuptools.build_sdist)
