"""qualflow.bench.report: a device run is printed next to the last committed one, point by point,
even where the two runs named their engine variants differently (the same point, the same
effective engine)."""

from __future__ import annotations

from qualflow.bench import report as run_report

ENGINE = {
    "device": "cuda",
    "effective_precision": "float16",
    "cuda_graphs": True,
    "compiled_ops": True,
    "async_scheduling": True,
    "mixed_batches": False,
    "varlen_attention": "flash-varlen",
    "fused_kernels": "triton",
    "prefill_graphs": [16, 32],
}


def point(tok_s: float, variant: str) -> dict:
    return {
        "output_tok_per_s": tok_s,
        "output_tok_per_s_min": tok_s,
        "output_tok_per_s_max": tok_s,
        "roofline": {"limit_tok_per_s": 90_000.0},
        "pct_of_roofline": 100 * tok_s / 90_000,
        "pct_of_decode_roofline": 0.0,
        "ttft_ms_p50": 28.0,
        "itl_ms_p50": 2.3,
        "met": False,
        "variant": variant,
    }


def test_a_point_is_matched_to_the_previous_variant_that_ran_the_same_engine(capsys):
    prev = {
        "date": "2026-12-02T00:25",
        "gpu": "NVIDIA H200",
        "variants": {
            "_base": {"task_info": {**ENGINE, "fused_kernels": "off", "prefill_graphs": None}},
            "_v3": {"task_info": ENGINE},
            "_v3_mixed": {"task_info": {**ENGINE, "mixed_batches": True}},
        },
        "points": {
            "c64_isl128_osl128_base": point(17_000, "_base"),
            "c64_isl128_osl128_v3": point(18_500, "_v3"),
            "c64_isl128_osl128_v3_mixed": point(12_800, "_v3_mixed"),
        },
        "offline_v3": {"output_tok_per_s": 13_929},
    }
    head = {
        "variants": {"_async": {"task_info": ENGINE}},
        "points": {"c64_isl128_osl128_async": point(24_212, "_async")},
        "offline_async": {"output_tok_per_s": 21_976, "met": False},
    }
    key, p = run_report._prev_point(
        prev, "c64_isl128_osl128_async", "_async", run_report._engine(head, "_async")
    )
    assert (key, p["output_tok_per_s"]) == ("c64_isl128_osl128_v3", 18_500)
    run_report.print_points(head, prev)
    table = capsys.readouterr().out
    row = next(ln for ln in table.splitlines() if ln.startswith("| c64_isl128_osl128_async"))
    assert "| 18500 (c64_isl128_osl128_v3) |" in row, row
    offline = next(ln for ln in table.splitlines() if ln.startswith("| offline_async"))
    assert "| 13929 |" in offline, offline


def test_a_point_the_previous_run_did_not_measure_has_no_previous_figure():
    prev = {
        "variants": {"_v3": {"task_info": ENGINE}},
        "points": {"c1_isl128_osl256_v3": point(734, "_v3")},
    }
    assert run_report._prev_point(prev, "c256_isl128_osl128_async", "_async", ENGINE) == ("", {})
    assert run_report._prev_point(prev, "c1_isl128_osl256", "", None)[0] == "c1_isl128_osl256_v3"


def test_an_engine_in_its_own_process_is_matched_to_a_previous_one_in_its_own_process():
    prev = {
        "variants": {
            "_thread": {"task_info": {**ENGINE, "engine_pid": None}},
            "_process": {"task_info": {**ENGINE, "engine_pid": 4242}},
        },
        "points": {
            "c256_isl128_osl128_thread": point(28_258, "_thread"),
            "c256_isl128_osl128_process": point(52_223, "_process"),
        },
    }
    head = {
        "variants": {
            "_async_proc": {"task_info": {**ENGINE, "engine_pid": 77}},
            "_async": {"task_info": {**ENGINE, "engine_pid": None}},
        }
    }
    key, _ = run_report._prev_point(
        prev,
        "c256_isl128_osl128_async_proc",
        "_async_proc",
        run_report._engine(head, "_async_proc"),
    )
    assert key == "c256_isl128_osl128_process"
    key, _ = run_report._prev_point(
        prev, "c256_isl128_osl128_async", "_async", run_report._engine(head, "_async")
    )
    assert key == "c256_isl128_osl128_thread"


def test_the_b1_decode_step_is_printed_beside_its_weight_read_floor(capsys):
    result = {
        "weight_read_floor_ms": 0.28,
        "variants": {
            "_flash": {
                "task_info": {**ENGINE, "programmatic_launch": "on"},
                "graph_replay_ms": {"b1_ctx256": 0.56, "b64_ctx256": 2.0},
                "decode_kernels": {"b1_ctx256": {"replay": {"kernels_per_step": 228}}},
            }
        },
    }
    run_report.print_variants(result)
    row = capsys.readouterr().out.splitlines()[-1]
    assert "| 0.560 (2.00x) |" in row and "; flash-varlen |" in row
