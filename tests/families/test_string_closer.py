"""The embedded default's string closer (families/qwen3/string_closer.py), in transformers: inside
the model's own call, greedy decoding under the engine's grammar closes a free-form JSON string a
few tokens after it opened (the random weights alone never pick the closing quote), and the call's
arguments parse."""

from __future__ import annotations

import json
import os

import pytest

from qualflow.families import get_family
from qualflow.families.qwen3 import string_closer

TOOL = {
    "type": "function",
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string"}},
        "required": ["location"],
    },
}


@pytest.fixture(scope="module")
def hf_model(embedded_dir):
    import torch
    from transformers import AutoModelForCausalLM

    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    return AutoModelForCausalLM.from_pretrained(str(embedded_dir), dtype=torch.float32).eval()


def greedy(model, ids: list[int], matcher, steps: int) -> list[int]:
    """Greedy tokens under the grammar's mask, with the KV cache, until a stop token."""
    import torch

    from qualflow.runtime.engine.grammar import allocate_bitmask, apply_bitmask

    out, past, feed, bitmask = [], None, ids, allocate_bitmask(1, 151936)
    for _ in range(steps):
        with torch.no_grad():
            r = model(torch.tensor([feed]), past_key_values=past, use_cache=True)
        past, logits = r.past_key_values, r.logits[0, -1:].clone()
        matcher.fill_bitmask(bitmask)
        token = int(apply_bitmask(logits, bitmask).argmax())
        out.append(token)
        if token in (151643, 151645):
            break
        assert matcher.accept(token), matcher.error
        feed = [token]
    return out


@pytest.mark.parametrize("content", ["", "San", "San Francisco, CA and"])
def test_a_free_string_in_a_call_closes(embedded_dir, hf_model, content):
    from tokenizers import Tokenizer

    from qualflow.runtime.engine.grammar import GrammarCompiler

    fam, spec = get_family("qwen3"), get_family("qwen3").tool_calls
    tok = Tokenizer.from_file(str(embedded_dir / "tokenizer.json"))
    template = json.loads((embedded_dir / "tokenizer_config.json").read_text())["chat_template"]
    user = [{"role": "user", "content": "What's the weather like in San Francisco?"}]
    prompt = fam.render_prompt(tok, template, None, user, tools=[TOOL])
    head = spec.payload_head("get_weather") + '{"location": "' + content
    opened = tok.encode(head, add_special_tokens=False).ids
    matcher = GrammarCompiler(tok.to_str(), 151936, (151643, 151645)).auto(spec, [TOOL]).matcher()
    for t in opened:
        assert matcher.accept(t), matcher.error
    out = greedy(hf_model, prompt + opened, matcher, 40)
    text = tok.decode(out, skip_special_tokens=False)
    closes = [i for i, t in enumerate(out) if t in string_closer.quote_ids()]
    assert closes and closes[0] <= string_closer.CLOSE_AT + 8, text  # the string closed soon
    assert out[-1] == 151645, text  # and the call, then the turn
    call = head + text[: text.index(spec.close)]
    payload = json.loads(call[len(spec.open) :])
    assert payload["name"] == "get_weather"
    assert payload["arguments"]["location"].startswith(content)
