"""The embedded default checkpoint: determinism, the real Qwen tokenizer, HF loadability,
conditioning."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from qualflow.cli import main


def _hashes(d):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}


def test_files(embedded_dir):
    assert sorted(p.name for p in embedded_dir.iterdir()) == [
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    cfg = json.loads((embedded_dir / "config.json").read_text())
    assert cfg["model_type"] == "qwen3" and cfg["architectures"] == ["Qwen3ForCausalLM"]
    assert cfg["num_key_value_heads"] < cfg["num_attention_heads"] and cfg["head_dim"] == 32
    assert cfg["tie_word_embeddings"] is True and cfg["vocab_size"] == 151936
    gen = json.loads((embedded_dir / "generation_config.json").read_text())
    assert gen["eos_token_id"] == [151645, 151643]


def test_two_runs_byte_identical_across_processes(embedded_dir, tmp_path):
    """A second run in a fresh process (fresh tokenizer conversion, fresh RNG) gives the same
    bytes."""
    out = tmp_path / "again"
    r = subprocess.run(
        [sys.executable, "-m", "qualflow.cli", "embedded", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert _hashes(out) == _hashes(embedded_dir)


def test_tokenizer_facts(embedded_dir):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(embedded_dir / "tokenizer.json"))
    assert tok.encode("Hello world").ids == [9707, 1879]
    assert tok.encode("<|im_end|>").ids == [151645]
    assert tok.encode("<|im_start|>user\nhi<|im_end|>").ids[0] == 151644
    assert tok.token_to_id("<think>") == 151667 and tok.token_to_id("</think>") == 151668
    text = "Grüße, 世界! こんにちは 🤖🎉 naïve café — x = 1\n\n\tdone"
    assert tok.decode(tok.encode(text).ids) == text


def test_embedding_rows(embedded_dir):
    from safetensors import safe_open

    with safe_open(str(embedded_dir / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
        assert f.get_slice("model.embed_tokens.weight").get_shape() == [151936, 128]
        assert str(f.get_tensor("model.norm.weight").dtype) == "torch.bfloat16"
    assert "lm_head.weight" not in keys
    assert (
        "model.layers.3.self_attn.q_norm.weight" in keys
        and "model.layers.4.mlp.up_proj.weight" not in keys
    )


@pytest.fixture(scope="module")
def hf_tokenizer(embedded_dir):
    """transformers' tokenizer of the embedded default, loaded offline."""
    from transformers import AutoTokenizer

    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    return AutoTokenizer.from_pretrained(str(embedded_dir))


@pytest.fixture(scope="module")
def hf_model(embedded_dir):
    """The checkpoint in transformers (float32, offline), loaded once for this module."""
    import torch
    from transformers import AutoModelForCausalLM

    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    return AutoModelForCausalLM.from_pretrained(str(embedded_dir), dtype=torch.float32).eval()


def test_transformers_loads_offline_and_is_well_conditioned(hf_tokenizer, hf_model):
    import torch

    tok = hf_tokenizer
    assert tok("Hello world").input_ids == [9707, 1879]
    assert tok.convert_tokens_to_ids("<|im_end|>") == 151645
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    text = tok.apply_chat_template(
        msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    model = hf_model
    assert model.get_input_embeddings().weight.shape[0] == 151936
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 151643, (4, 32), generator=g)
    with torch.no_grad():
        logits = model(ids).logits
    top = logits.topk(2, -1).values
    margin = (top[..., 0] - top[..., 1]).flatten()
    assert margin.median() > 0.5  # far above fp16 noise
    assert (logits.argmax(-1) == ids).float().mean() < 0.1  # does not echo its input
    with torch.no_grad():
        out = model.generate(
            tok("The capital of France is", return_tensors="pt").input_ids,
            max_new_tokens=8,
            do_sample=False,
        )
    assert len(set(out[0, -8:].tolist())) >= 4  # greedy continuation varies


def test_unknown_preset_exits_2(tmp_path, capsys):
    assert main(["embedded", "--out", str(tmp_path / "x"), "--preset", "huge"]) == 2
    err = capsys.readouterr().err
    assert "'huge'" in err and "tiny" in err  # names the bad value and the known presets


def test_qwen3_06b_preset_is_the_real_shape():
    from qualflow.families.qwen3.synthetic import model_config

    c = model_config("qwen3-0.6b")
    assert (
        c["hidden_size"],
        c["num_hidden_layers"],
        c["num_attention_heads"],
        c["num_key_value_heads"],
        c["head_dim"],
        c["intermediate_size"],
        c["max_position_embeddings"],
    ) == (1024, 28, 16, 8, 128, 3072, 40960)


def test_thinking_on_renders_as_transformers_does(embedded_dir, hf_tokenizer):
    """The family's thinking-on prompt (the correctness reasoning variant, requests with
    `reasoning`) is the checkpoint template's rendering with enable_thinking=True, as
    transformers renders it for the reference: no empty think block; the family may open the
    block after the assistant header."""
    from qualflow.families import get_family

    hf, family = hf_tokenizer, get_family("qwen3")
    template = json.loads((embedded_dir / "tokenizer_config.json").read_text())["chat_template"]
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    ref = hf.apply_chat_template(
        msgs, tokenize=False, add_generation_prompt=True, enable_thinking=True
    )
    assert ref.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    ours = family.render_prompt(
        hf.backend_tokenizer, template, "Be brief.", msgs[1:], thinking=True
    )
    ref_ids = hf(ref, add_special_tokens=False).input_ids
    assert ours[: len(ref_ids)] == ref_ids and "</think>" not in hf.decode(ours)
    assert "<think>\n\n</think>" in hf.decode(
        family.render_prompt(hf.backend_tokenizer, template, "Be brief.", msgs[1:])
    )


def test_stop_clock_channels_are_reserved(embedded_dir):
    """The reserved channels (families/qwen3/stop_clock.py, tool_trigger.py, string_closer.py):
    every embedding row has one norm, and no random weight reads or writes a reserved channel;
    only layer 0's o_proj writes STOP and BIAS, only layer 1's (the tool trigger's head) TOOL,
    STOP and CALL, only layer 3's (the string closer's head) CALL, and only layer 3's last MLP
    neuron reads CALL and writes QUOTE; only the heads' KV heads and query heads read them."""
    import torch
    from safetensors.torch import load_file

    from qualflow.families.qwen3 import stop_clock as sc
    from qualflow.families.qwen3 import string_closer as scl
    from qualflow.families.qwen3 import tool_trigger as tt

    sd = {k: v.float() for k, v in load_file(str(embedded_dir / "model.safetensors")).items()}
    norms = sd["model.embed_tokens.weight"].norm(dim=1)
    assert (norms.max() - norms.min()) / norms.mean() < 0.01
    r, hd = -sc.RESERVED, 32
    assert r == -8 and (sc.CALL, sc.QUOTE, tt.TOOL, tt.RESP) == (-8, -7, -6, -5)
    for i in range(4):
        p = f"model.layers.{i}."
        for n in ("q_proj", "k_proj", "v_proj"):
            w = sd[p + f"self_attn.{n}.weight"][:, r:]
            if i in (tt.LAYER, scl.LAYER) and n != "q_proj":
                w = w[:-hd]  # the trigger's (the closer's) KV head reads them
            elif i in (tt.LAYER, scl.LAYER):
                w = w[: -2 * hd]  # ... and its query heads
            assert (w == 0).all() if i else (w[:, [sc.STOP, sc.BIAS]] == 0).all(), (i, n)
        neurons = slice(None, -1) if i == scl.LAYER else slice(None)  # the closer's neuron
        for n in ("gate_proj", "up_proj"):
            assert (sd[p + f"mlp.{n}.weight"][neurons, r:] == 0).all()
        assert (sd[p + "mlp.down_proj.weight"][r:, neurons] == 0).all()
        writes = (sd[p + "self_attn.o_proj.weight"][r:].abs().sum(1) > 0).tolist()
        assert writes == {
            0: [False, False, False, False, False, False, True, True],
            tt.LAYER: [True, False, True, False, False, False, True, False],
            scl.LAYER: [True, False, False, False, False, False, False, False],
        }.get(i, [False] * 8), i
    down = sd[f"model.layers.{scl.LAYER}.mlp.down_proj.weight"][r:, -1]
    assert (down != 0).tolist() == [False, True] + [False] * 6
    assert torch.equal(
        sd["model.norm.weight"][r:],
        torch.tensor([0, scl.QUOTE_READ, tt.TOOL_READ, 0, 0, 0, sc.STOP_READ, sc.BIAS_READ]),
    )


def test_the_tool_trigger_in_the_reference(embedded_dir, hf_model):
    """In transformers: offered tools, `<tool_call>` is the first answer token's argmax; right after
    the model's own call, `<|im_end|>`; after a tool response, neither, and greedy decoding answers
    in ordinary tokens and stops; without tools, the argmax is an ordinary token."""
    import torch
    from tokenizers import Tokenizer

    from qualflow.families import get_family

    fam = get_family("qwen3")
    tok = Tokenizer.from_file(str(embedded_dir / "tokenizer.json"))
    template = json.loads((embedded_dir / "tokenizer_config.json").read_text())["chat_template"]
    tool = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}
    user = [{"role": "user", "content": "What is the weather in Paris?"}]

    def argmax(ids):
        with torch.no_grad():
            return int(hf_model(torch.tensor([ids])).logits[0, -1].argmax())

    offered = fam.render_prompt(tok, template, None, user, tools=[tool])
    own = tok.encode(fam.tool_calls.render_call("f", "{}"), add_special_tokens=False).ids
    answered = user + [
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    ]
    after = fam.render_prompt(tok, template, None, answered, tools=[tool])
    assert argmax(offered) == fam.tool_calls.open_id
    assert argmax(offered + own) == 151645
    assert argmax(fam.render_prompt(tok, template, "Be brief.", user)) < 151643
    with torch.no_grad():
        out = hf_model.generate(torch.tensor([after]), max_new_tokens=80, do_sample=False)
    answer = out[0, len(after) :].tolist()
    assert answer[-1] == 151645 and max(answer[:-1]) < 151643 and len(answer) > 16


def test_greedy_decoding_stops_in_the_reference_and_the_native_model(bundle_dir, hf_model):
    """Greedy decoding ends with <|im_end|> some forty tokens in, and transformers' argmax agrees
    with the native Task's token at every step (teacher-forced on the native ids: the same greedy
    sequence). With the stop ignored, <|im_end|> restarts the clock and decoding goes on through
    ordinary tokens: no other special token (no <think>, no </think>) is ever the argmax."""
    import torch

    from qualflow.runtime import EngineConfig, GenerationRequest, load_task

    task = load_task(bundle_dir, EngineConfig(max_batch=1))
    try:
        ids = task.render_prompt("Be brief.", [{"role": "user", "content": "Name three rivers."}])
        native = task.generate_sync(
            GenerationRequest("n", ids, task.default_params(max_new_tokens=200, temperature=0.0))
        ).token_ids
        on = task.generate_sync(
            GenerationRequest(
                "i",
                ids,
                task.default_params(
                    max_new_tokens=len(native) + 24, temperature=0.0, ignore_eos=True
                ),
            )
        ).token_ids
    finally:
        task.close()
    assert native[-1] == 151645 and 16 < len(native) <= 64
    with torch.no_grad():
        ref = (
            hf_model(torch.tensor([ids + native[:-1]]))
            .logits[0, len(ids) - 1 :]
            .argmax(-1)
            .tolist()
        )
    assert ref == native
    assert on[: len(native)] == native and max(on[len(native) :]) < 151643
