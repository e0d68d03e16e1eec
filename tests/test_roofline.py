"""qualflow.roofline: the GPU peak table matches the names CUDA reports, and a point's limit is the
weight and K/V reads of its decode steps at the bandwidth plus its prefill FLOPs at the peak."""

from __future__ import annotations

import pytest

from qualflow.roofline import gpu_peaks, point_roofline, workload_roofline

SHAPE = {"params": 5e8, "weight_bytes": 1e9, "kv_bytes_per_token": 1e5}
DEVICE = {"copy_bandwidth_tb_s": 1.0, "matmul_tflops": 100.0}


@pytest.mark.parametrize(
    ("name", "tb_s", "tflops"),
    [
        ("NVIDIA H100 80GB HBM3", 3.35, 989.4),
        ("NVIDIA H100 PCIe", 2.0, 756.0),
        ("NVIDIA H100 NVL", 3.9, 835.0),
        ("NVIDIA H200", 4.8, 989.4),
        ("NVIDIA H200 NVL", 4.8, 835.0),
        ("NVIDIA A100-SXM4-80GB", 2.039, 312.0),
    ],
)
def test_a_known_gpu_gets_its_datasheet_peaks(name, tb_s, tflops):
    assert gpu_peaks(name) == {"copy_bandwidth_tb_s": tb_s, "matmul_tflops": tflops}


@pytest.mark.parametrize("name", ["NVIDIA GeForce RTX 4090", "", None])
def test_an_unknown_gpu_has_no_peaks(name):
    assert gpu_peaks(name) is None


def test_a_point_limit_is_its_decode_reads_plus_its_prefill_flops():
    r = point_roofline(SHAPE, concurrency=2, isl=100, osl=3, device=DEVICE)
    # decode: 3 steps of the weights, and 2 sequences reading contexts 101, 102, 103
    decode = (3 * 1e9 + 2 * (101 + 102 + 103) * 1e5) / 1e12
    prefill = 2 * 100 * 2 * 5e8 / 100e12
    assert r["decode_s_min"] == pytest.approx(decode)
    assert r["prefill_s_min"] == pytest.approx(prefill)
    assert r["limit_tok_per_s"] == pytest.approx(6 / (decode + prefill))
    assert r["decode_limit_tok_per_s"] == pytest.approx(6 / decode)


def test_a_workload_reads_the_weights_once_per_step_of_its_longest_output():
    r = workload_roofline(SHAPE, [10, 20], [2, 4], DEVICE)
    decode = (4 * 1e9 + ((11 + 12) + (21 + 22 + 23 + 24)) * 1e5) / 1e12
    assert r["decode_s_min"] == pytest.approx(decode)
    assert r["limit_tok_per_s"] == pytest.approx(6 / (decode + 30 * 2 * 5e8 / 100e12))
