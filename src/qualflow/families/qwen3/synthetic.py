"""The qwen3 family's synthetic checkpoint (the embedded default): a Hugging Face format Qwen3
checkpoint with seeded random weights and the real Qwen tokenizer, created locally with no network.

`write_embedded(out_dir, preset)` writes config.json, model.safetensors, generation_config.json,
tokenizer.json and tokenizer_config.json. Every byte is a function of the preset alone: two runs on
any machine give identical files (weights are drawn in float64 on CPU from an explicit generator
with a fixed seed, then rounded to bfloat16; JSON is written with fixed key order and formatting).
"""

from __future__ import annotations

import os
from pathlib import Path

from qualflow.files import save_safetensors

from . import stop_clock, string_closer, tool_trigger
from .tokenizer_files import EmbeddedError, dumps, tokenizer_config, tokenizer_json

PRESETS: dict[str, dict] = {
    "tiny": dict(
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        intermediate_size=384,
        max_position_embeddings=3072,  # the recorded agent turns (up to ~2.3k tokens) fit
    ),
    "qwen3-0.6b": dict(
        hidden_size=1024,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=3072,
        max_position_embeddings=40960,
    ),
}
# The stop clock's final-norm gains scale with the residual stream's RMS at the last layer, which
# the random layers set (measured: ~17 for tiny, ~49 for qwen3-0.6b), so that the stop and
# special-token logits sit at the same distance from the random ones at either size.
STOP_READ_SCALE = {"tiny": 1.0, "qwen3-0.6b": 3.0}
SEED = 20260601
VOCAB_SIZE = 151936
BOS_ID, EOS_ID, PAD_ID = 151643, 151645, 151643
# Scale of the embedding (also the tied LM head). Chosen so that logits have a spread of several
# units (top-1 margins well above fp16 noise) while the layers, not the input embedding, dominate
# the residual stream (so greedy decoding does not just echo the input token).
EMBED_STD = 0.7
OUT_GAIN = 10.0  # std multiplier of o_proj / down_proj

# ------------------------------------------------------------------------------------- config


def model_config(preset: str, seed: int = SEED) -> dict:
    if preset not in PRESETS:
        raise EmbeddedError(f"unknown preset {preset!r}; known: {sorted(PRESETS)}")
    p = PRESETS[preset]
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": BOS_ID,
        "dtype": "bfloat16",
        "eos_token_id": EOS_ID,
        "head_dim": p["head_dim"],
        "hidden_act": "silu",
        "hidden_size": p["hidden_size"],
        "initializer_range": 0.02,
        "intermediate_size": p["intermediate_size"],
        "max_position_embeddings": p["max_position_embeddings"],
        "max_window_layers": p["num_hidden_layers"],
        "model_type": "qwen3",
        "num_attention_heads": p["num_attention_heads"],
        "num_hidden_layers": p["num_hidden_layers"],
        "num_key_value_heads": p["num_key_value_heads"],
        "rms_norm_eps": 1e-6,
        "rope_scaling": None,
        "rope_theta": 1000000,
        "sliding_window": None,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": VOCAB_SIZE,
        "qualflow_embedded": {"preset": preset, "seed": seed},
    }


GENERATION_CONFIG = {
    "bos_token_id": BOS_ID,
    "do_sample": True,
    "eos_token_id": [EOS_ID, BOS_ID],
    "pad_token_id": PAD_ID,
    "temperature": 0.6,
    "top_k": 20,
    "top_p": 0.95,
}


# ------------------------------------------------------------------------------------ weights


def _normal(gen, shape: tuple[int, ...], std: float, mean: float = 0.0):
    """N(mean, std^2) drawn in float64 on CPU (scalar code path: bit-identical across CPUs), rounded
    to bfloat16. Large tensors are drawn in fixed row chunks to bound memory."""
    import torch

    rows = shape[0]
    per_row = 1
    for s in shape[1:]:
        per_row *= s
    chunk = max(1, (1 << 22) // per_row)
    parts = []
    for r0 in range(0, rows, chunk):
        n = min(chunk, rows - r0)
        x = torch.randn((n,) + tuple(shape[1:]), generator=gen, dtype=torch.float64)
        parts.append((x * std + mean).to(torch.float32).to(torch.bfloat16))
    return torch.cat(parts, 0).contiguous()


def make_weights(preset: str, seed: int = SEED) -> dict:
    """HF Qwen3 state dict (bf16), seeded. Linear weights N(0, 1/fan_in); norm weights 1 + N(0,
    0.05); output projections (o_proj, down_proj) with OUT_GAIN/sqrt(fan_in) so the layers
    dominate the residual stream over the input embedding (no echo of the input token)."""
    import torch

    cfg = model_config(preset, seed)
    d, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    hq, hk, hd, ff = (
        cfg["num_attention_heads"],
        cfg["num_key_value_heads"],
        cfg["head_dim"],
        cfg["intermediate_size"],
    )
    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    sd: dict[str, torch.Tensor] = {}
    # The logit spread is EMBED_STD * sqrt(128) at every size: the std shrinks with sqrt(hidden).
    sd["model.embed_tokens.weight"] = _normal(g, (VOCAB_SIZE, d), EMBED_STD * (128 / d) ** 0.5)
    for i in range(L):
        p = f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = _normal(g, (d,), 0.05, 1.0)
        sd[p + "self_attn.q_proj.weight"] = _normal(g, (hq * hd, d), d**-0.5)
        sd[p + "self_attn.k_proj.weight"] = _normal(g, (hk * hd, d), d**-0.5)
        sd[p + "self_attn.v_proj.weight"] = _normal(g, (hk * hd, d), d**-0.5)
        sd[p + "self_attn.o_proj.weight"] = _normal(g, (d, hq * hd), (hq * hd) ** -0.5 * OUT_GAIN)
        sd[p + "self_attn.q_norm.weight"] = _normal(g, (hd,), 0.05, 1.0)
        sd[p + "self_attn.k_norm.weight"] = _normal(g, (hd,), 0.05, 1.0)
        sd[p + "post_attention_layernorm.weight"] = _normal(g, (d,), 0.05, 1.0)
        sd[p + "mlp.gate_proj.weight"] = _normal(g, (ff, d), d**-0.5)
        sd[p + "mlp.up_proj.weight"] = _normal(g, (ff, d), d**-0.5)
        sd[p + "mlp.down_proj.weight"] = _normal(g, (d, ff), ff**-0.5 * OUT_GAIN)
    sd["model.norm.weight"] = _normal(g, (d,), 0.05, 1.0)
    scale = STOP_READ_SCALE[preset]
    stop_clock.install(sd, cfg, EMBED_STD * (128 / d) ** 0.5, scale, _mark_rows)
    tool_trigger.install(sd, cfg, scale)
    return string_closer.install(sd, cfg, scale)


def _mark_rows(emb) -> None:
    tool_trigger.mark_rows(emb)
    string_closer.mark_rows(emb)


# -------------------------------------------------------------------------------------- write


def write_embedded(out_dir: str | os.PathLike, preset: str = "tiny", seed: int = SEED) -> Path:
    """`seed`: another seed gives other weights of the same shape (the default is the embedded
    default)."""
    cfg = model_config(preset, seed)  # validates preset
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(dumps(cfg), encoding="utf-8")
    (out / "generation_config.json").write_text(dumps(GENERATION_CONFIG), encoding="utf-8")
    (out / "tokenizer.json").write_text(tokenizer_json(), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(
        dumps(tokenizer_config(cfg["max_position_embeddings"])), encoding="utf-8"
    )
    save_safetensors(make_weights(preset, seed), out / "model.safetensors")
    return out
