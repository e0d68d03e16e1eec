"""evidence.roofline: a point served on a known GPU gets its roofline (the bundle's shape at the
GPU's datasheet peaks) and its share of it in the summary and the report; a CPU session, or a GPU
not in the table, says why it has none."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from fixtures.sessions import join, make_session
from qualflow.files import save_safetensors
from qualflow.report.page import load_evidence
from qualflow.report.rooflines import rooflines_html
from qualflow.roofline import gpu_peaks, point_roofline

CONFIG = {
    "vocab_size": 64,
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "intermediate_size": 32,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 128,
}


def served_on(tmp_path, gpu: str | None):
    """A session of POINT (c2, ISL 32, OSL 16) on `gpu` (None: cpu) over a qwen3 bundle of 2 fp16
    tensors (120 parameters)."""
    extra = {"device": "cuda", "gpu": {"index": 0, "name": gpu}} if gpu else None
    s, _ = make_session(tmp_path, session_extra=extra)
    b = tmp_path / "bundle"
    manifest = json.loads((b / "manifest.json").read_text())
    (b / "manifest.json").write_text(json.dumps({**manifest, "family": "qwen3"}))
    (b / "config.json").write_text(json.dumps(CONFIG))
    w = {"a": torch.zeros(8, 10, dtype=torch.float16), "b": torch.zeros(40, dtype=torch.float16)}
    save_safetensors(w, b / "weights.safetensors")
    return join(tmp_path, s)[1]["summary"].iloc[0]


def test_a_point_on_a_known_gpu_has_its_share_of_the_roofline(tmp_path):
    row = served_on(tmp_path, "NVIDIA H200")
    # 2 layers x (K and V) x 2 kv heads x head dim 8 x 2 bytes
    shape = {"params": 120, "weight_bytes": 240, "kv_bytes_per_token": 2 * 2 * 2 * 8 * 2}
    limit = point_roofline(shape, 2, 32, 16, gpu_peaks("NVIDIA H200"))["limit_tok_per_s"]
    assert row["roofline_gpu"] == "NVIDIA H200"
    assert row["roofline_output_token_throughput_tps"] == pytest.approx(limit)
    assert row["share_of_roofline"] == pytest.approx(row["output_token_throughput_tps"] / limit)
    page = rooflines_html(load_evidence([tmp_path / "ev"]))
    assert "NVIDIA H200" in page and f"{row['share_of_roofline']:.1%}" in page


@pytest.mark.parametrize(
    ("gpu", "why"),
    [
        (None, "ran on cpu: no GPU roofline"),
        ("NVIDIA GeForce RTX 4090", "GPU NVIDIA GeForce RTX 4090 is not in"),
    ],
)
def test_a_point_without_a_roofline_says_why(tmp_path, gpu, why):
    row = served_on(tmp_path, gpu)
    assert why in row["roofline_reasons"]
    assert pd.isna(row.get("roofline_output_token_throughput_tps"))
    assert why in rooflines_html(load_evidence([tmp_path / "ev"]))
