"""benchmarks/device/device_wheels.py's check of a carried wheel set, on small fake wheels: a
requirement must be carried, on the GPU machine or left behind on purpose; extras asked of a
carried wheel count; a carried or known machine version must satisfy the specifier; one wheel per
pinned name."""

from __future__ import annotations

import importlib.util
import zipfile

import pytest

from fixtures import REPO


@pytest.fixture
def dw(monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "device_wheels", REPO / "benchmarks" / "device" / "device_wheels.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "DEVICE", "numpy pyyaml")
    monkeypatch.setattr(mod, "DEVICE_VERSIONS", {"numpy": "2.5.2"})
    monkeypatch.setattr(mod, "LEFT_BEHIND", {"plotly": "plots only"})
    return mod


def wheel(d, name, version, *requires):
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    with zipfile.ZipFile(d / f"{name.replace('-', '_')}-{version}-py3-none-any.whl", "w") as z:
        z.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA", meta)


def test_a_consistent_set_passes(dw, tmp_path, monkeypatch):
    monkeypatch.setattr(dw, "CARRIED", "app==1.0 srv==2.0 fast==0.1")
    wheel(
        tmp_path,
        "app",
        "1.0",
        "srv[fast]>=2",
        "numpy>=2",
        "pyyaml",
        "plotly",
        'pywin32; sys_platform == "win32"',
    )
    wheel(tmp_path, "srv", "2.0", 'fast; extra == "fast"', 'slow; extra == "slow"')
    wheel(tmp_path, "fast", "0.1")
    assert dw.problems(tmp_path) == []


def test_each_gap_is_named(dw, tmp_path, monkeypatch):
    monkeypatch.setattr(dw, "CARRIED", "app==1.0 srv==2.0 gone==1.0")
    wheel(tmp_path, "app", "1.0", "srv[fast]>=3", "numpy<2", "missing")
    wheel(tmp_path, "srv", "2.0", 'fast; extra == "fast"')
    wheel(tmp_path, "srv", "2.1")
    wheel(tmp_path, "extra-one", "1.0")
    out = dw.problems(tmp_path)
    assert "gone==1.0: no wheel" in out
    assert any(p.startswith("srv: 2 wheels") for p in out), out
    assert "extra_one-1.0-py3-none-any.whl: not pinned in CARRIED" in out
    assert "app needs missing: neither carried nor on the machine" in out
    assert "app needs numpy<2: the machine has numpy==2.5.2" in out
    assert 'srv needs fast; extra == "fast": neither carried nor on the machine' in out
