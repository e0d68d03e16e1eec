"""`qualflow bench server --mode store`: a point's two sides over the alternated rounds, its schema
points, and the previous committed run it is printed beside (same device, same ISL and OSL)."""

from __future__ import annotations

import json

import pytest

from qualflow.bench import results, store_ab


def _side(tps: float) -> dict:
    return {"output_tok_per_s": tps, "itl_ms_p50": 3.0, "ttft_ms_p50": 100.0}


ROUNDS = [
    {"round": 0, "c": 64, "off": _side(1000.0), "on": _side(960.0)},
    {"round": 1, "c": 64, "off": _side(800.0), "on": _side(780.0)},  # a slow round, both sides
    {"round": 2, "c": 64, "off": _side(1000.0), "on": _side(900.0)},
]


def test_a_point_is_the_median_of_its_rounds_and_the_ratio_of_each_round():
    p = store_ab.point_summary(ROUNDS, 64)
    assert p["off"]["output_tok_per_s"] == 1000.0 and p["on"]["output_tok_per_s"] == 900.0
    assert p["ratio"]["ratio"] == pytest.approx(0.96)  # median of 0.96, 0.975, 0.9
    assert p["ratio"]["met"] is True and p["ratio"]["ratio_min"] == pytest.approx(0.9)


def _res(isl: str, ratio_rounds=ROUNDS) -> dict:
    return {
        "recorded_utc": "2026-12-07T00:00:00+00:00",
        "device_name": "NVIDIA H100 80GB HBM3",
        "isl": isl,
        "osl": "256",
        "store_rounds": 3,
        "rounds": ratio_rounds,
        "points": {"c64": store_ab.point_summary(ratio_rounds, 64)},
        "stored_responses": 10,
    }


def test_a_store_result_has_each_side_and_the_ratio_as_points():
    rec = results.record("store", "sqlite", "NVIDIA H100 80GB HBM3", "d", {}, _res("1024"))
    pts = {p["name"]: p["figures"] for p in rec["points"]}
    assert pts["c64_store_off"]["output_tok_per_s"] == 1000.0
    assert pts["c64_store_on_off"] == {"ratio": pytest.approx(0.96)}


def test_the_previous_run_is_the_newest_of_the_device_with_the_same_shape(tmp_path, capsys):
    folder = tmp_path / results.gpu_dir("NVIDIA H100 80GB HBM3")
    folder.mkdir()
    for name, isl, date in (("a", "1024", "2026-01-01"), ("b", "128", "2026-02-01")):
        rec = results.record("store", "sqlite", "NVIDIA H100 80GB HBM3", date, {}, _res(isl))
        (folder / f"{name}.json").write_text(json.dumps(rec))
    res = _res("1024")
    prev = store_ab.previous(tmp_path, res)
    assert prev["isl"] == "1024"
    assert store_ab.previous(tmp_path, {**res, "device_name": "NVIDIA H200"}) == {}
    store_ab.print_store(res, prev)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("c64"))
    assert line.split()[3:5] == ["0.960", "[0.900,"] and "0.960" in line.split()[6]
