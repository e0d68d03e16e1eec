"""Hugging Face Qwen3 state dict -> the runtime layout (fused qkv and gate_up projections)."""

from __future__ import annotations

import torch


def hf_to_native(hf: dict[str, torch.Tensor], config: dict) -> dict[str, torch.Tensor]:
    def get(name: str) -> torch.Tensor:
        if name not in hf:
            raise ValueError(f"checkpoint lacks tensor {name!r}")
        return hf[name]

    out = {"embed": get("model.embed_tokens.weight"), "norm": get("model.norm.weight")}
    if not config.get("tie_word_embeddings", False):
        out["lm_head"] = get("lm_head.weight")
    for i in range(config["num_hidden_layers"]):
        src, dst = f"model.layers.{i}.", f"layers.{i}."
        a, m = src + "self_attn.", src + "mlp."
        out[dst + "attn_norm"] = get(src + "input_layernorm.weight")
        out[dst + "mlp_norm"] = get(src + "post_attention_layernorm.weight")
        out[dst + "qkv"] = torch.cat(
            [get(a + "q_proj.weight"), get(a + "k_proj.weight"), get(a + "v_proj.weight")]
        )
        out[dst + "q_norm"] = get(a + "q_norm.weight")
        out[dst + "k_norm"] = get(a + "k_norm.weight")
        out[dst + "o"] = get(a + "o_proj.weight")
        out[dst + "gate_up"] = torch.cat([get(m + "gate_proj.weight"), get(m + "up_proj.weight")])
        out[dst + "down"] = get(m + "down_proj.weight")
    return out
