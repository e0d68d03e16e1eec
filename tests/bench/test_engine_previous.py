"""qualflow.bench.engine: a device run is printed next to the last committed run of the same GPU
model (its folder of benchmarks/results/), never next to another model's run or the older tree's
side of an A/B."""

from __future__ import annotations

import json

from qualflow.bench import engine
from qualflow.bench import results as schema

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


def _run(schema, folder, name: str, gpu: str, date: str, kind: str = "engine", detail=None) -> None:
    """A committed run in the results schema, in its GPU model's folder."""
    d = folder / schema.gpu_dir(gpu)
    d.mkdir(exist_ok=True)
    detail = (
        {"date": date, "gpu": gpu, "points": {}, "copy_bandwidth_tb_s": 3.0}
        if detail is None
        else detail
    )
    (d / f"{name}.json").write_text(json.dumps(schema.record(kind, "async", gpu, date, {}, detail)))


def test_the_previous_run_is_the_newest_of_the_same_gpu_and_not_an_older_tree(tmp_path):
    s = schema
    _run(s, tmp_path, "2026-12-05-engine-async", H100, "2026-12-05T10:00")
    _run(s, tmp_path, "2026-12-06-engine-ab-new1", H100, "2026-12-06T05:00")
    _run(
        s, tmp_path, "2026-12-06-engine-ab-old1", H100, "2026-12-06T05:02"
    )  # the older tree's side
    _run(s, tmp_path, "2026-12-06-engine-async", H200, "2026-12-06T06:00")  # another GPU model
    _run(s, tmp_path, "2026-12-06-server", H100, "2026-12-06T07:00", "server", {})
    assert engine.previous_figures(tmp_path, H100)["date"] == "2026-12-06T05:00"
    assert engine.previous_figures(tmp_path, H200)["date"] == "2026-12-06T06:00"
    assert engine.previous_figures(tmp_path, "NVIDIA A100-SXM4-80GB") == {}
