"""The results schema's pilot points (bench/results.py): each beside its roofline where the run's
evidence summary has one."""

from __future__ import annotations

from qualflow.bench.results import record


def test_a_pilot_point_carries_its_roofline_from_the_summary():
    raw = {
        "status": [
            {
                "point_id": "c64",
                "status": "slo-met",
                "output_tps": 12000.0,
                "ttft_p50_ms": 90.0,
                "itl_p50_ms": 4.0,
            },
            {
                "point_id": "c1",
                "status": "slo-met",
                "output_tps": 800.0,
                "ttft_p50_ms": 7.0,
                "itl_p50_ms": 1.2,
            },
        ],
        "summary": [
            {"point_id": "c64", "roofline_output_token_throughput_tps": 16000.0},
            {"point_id": "c1", "roofline_output_token_throughput_tps": None},
        ],
    }
    c64, c1 = record("pilot", "pilot", "NVIDIA H100", "2026-12-07", {}, raw)["points"]
    assert c64["roofline"] == {"output_tok_per_s": 16000.0} and c64["share_of_roofline"] == 0.75
    assert c1["roofline"] == {} and c1["share_of_roofline"] is None


def test_a_pilot_record_without_a_summary_has_no_rooflines():
    raw = {
        "status": [
            {
                "point_id": "c8",
                "status": "slo-met",
                "output_tps": 4600.0,
                "ttft_p50_ms": 25.0,
                "itl_p50_ms": 1.6,
            }
        ]
    }
    (p,) = record("pilot", "pilot", "NVIDIA H100", "2026-12-07", {}, raw)["points"]
    assert p["figures"]["output_tok_per_s"] == 4600.0 and p["share_of_roofline"] is None
