"""benchmarks/gpu_speed.py: a device run is printed next to the last committed run of the same GPU model,
never next to another model's run or the older tree's side of an A/B."""
from __future__ import annotations

import importlib.util
import json

import pytest

from fixtures import REPO

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


@pytest.fixture()
def gpu_speed(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))   # its sibling modules (roofline, run_report, ...)
    spec = importlib.util.spec_from_file_location("gpu_speed", REPO / "benchmarks" / "gpu_speed.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(folder, name: str, gpu: str, date: str) -> None:
    (folder / f"{name}.json").write_text(json.dumps({"date": date, "gpu": gpu, "points": {}, "copy_bandwidth_tb_s": 3.0}))


def test_the_previous_run_is_the_newest_of_the_same_gpu_and_not_an_older_tree(gpu_speed, tmp_path):
    _run(tmp_path, "2026-12-05-NVIDIA-H100-80GB-HBM3", H100, "2026-12-05T10:00")
    _run(tmp_path, "2026-12-06-NVIDIA-H100-80GB-HBM3-ab-new1", H100, "2026-12-06T05:00")
    _run(tmp_path, "2026-12-06-NVIDIA-H100-80GB-HBM3-ab-old1", H100, "2026-12-06T05:02")   # the older tree's side
    _run(tmp_path, "2026-12-06-NVIDIA-H200", H200, "2026-12-06T06:00")                     # another GPU model
    (tmp_path / "2026-12-06-NVIDIA-H100-80GB-HBM3-server-speed.json").write_text(json.dumps({"gpu": H100}))
    assert gpu_speed.previous_figures(tmp_path, H100)["date"] == "2026-12-06T05:00"
    assert gpu_speed.previous_figures(tmp_path, H200)["date"] == "2026-12-06T06:00"
    assert gpu_speed.previous_figures(tmp_path, "NVIDIA A100-SXM4-80GB") == {}
