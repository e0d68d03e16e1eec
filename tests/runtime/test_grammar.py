"""Constrained decoding on CPU with the embedded tokenizer: random sampling under the grammar's mask
gives only outputs that are valid (calls in the family's format with schema-valid arguments, JSON
that validates against the schema); a grammar is compiled once per tokenizer; thinking is left
free."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest
import torch

from qualflow.families import get_family
from qualflow.runtime.api.tool_calls import CallDone, ToolText
from qualflow.runtime.engine.grammar import (
    GrammarCompiler,
    GrammarError,
    allocate_bitmask,
    apply_bitmask,
)
from qualflow.runtime.frontend.tool_calls import ToolCallParser

FAMILY = get_family("qwen3")
SPEC, VOCAB, STOPS = FAMILY.tool_calls, 151936, (151643, 151645)
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "strict": True,
    "parameters": {
        "type": "object",
        "additionalProperties": False,
        "required": ["city", "days"],
        "properties": {
            "city": {"type": "string", "maxLength": 6},
            "days": {"type": "integer", "minimum": 1},
            "unit": {"enum": ["c", "f"]},
        },
    },
}
TIME = {
    "type": "function",
    "name": "get_time",
    "strict": True,
    "parameters": {
        "type": "object",
        "additionalProperties": False,
        "required": ["zones"],
        "properties": {
            "zones": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 4}},
            "exact": {"type": "boolean"},
        },
    },
}
SCHEMAS = {t["name"]: t["parameters"] for t in (WEATHER, TIME)}


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer

    from qualflow.families.qwen3.synthetic import tokenizer_json

    return Tokenizer.from_str(tokenizer_json())


@pytest.fixture(scope="module")
def compiler(tokenizer):
    return GrammarCompiler(tokenizer.to_str(), VOCAB, STOPS)


@pytest.fixture(scope="module")
def ends(tokenizer):
    """Tokens that end a JSON string, number or container (drawn often, so samples stay short)."""
    vocab = tokenizer.get_vocab()
    mask = torch.zeros(VOCAB, dtype=torch.bool)
    mask[[i for t, i in vocab.items() if any(c in t for c in '"}],') and len(t) <= 3]] = True
    return mask


def sample(matcher, ends, rng: random.Random, max_steps: int = 400, prefer=()) -> list[int]:
    """Random tokens under the mask (random logits; often a token that closes something, or one of
    `prefer` when allowed) until a stop token."""
    bitmask, out = allocate_bitmask(1, VOCAB), []
    for _ in range(max_steps):
        matcher.fill_bitmask(bitmask)
        noise = torch.randn(1, VOCAB, generator=torch.Generator().manual_seed(rng.getrandbits(63)))
        logits = apply_bitmask(noise, bitmask)[0]
        allowed = torch.isfinite(logits)
        preferred = [t for t in prefer if allowed[t]]
        if preferred and rng.random() < 0.5:
            token = rng.choice(preferred)
        elif (allowed & ends).any() and rng.random() < 0.6:
            token = rng.choice(torch.nonzero(allowed & ends).flatten().tolist())
        else:
            token = int(logits.argmax())
        if token in STOPS:
            return out
        assert matcher.accept(token), matcher.error
        out.append(token)
    raise AssertionError(f"no stop after {max_steps} tokens")


def calls_in(text: str) -> tuple[str, list[tuple[str, dict]]]:
    p = ToolCallParser(SPEC)
    events = p.push(text) + p.finish()
    assert not [e for e in events if type(e).__name__ == "CallInvalid"], events
    return (
        "".join(e.text for e in events if isinstance(e, ToolText)),
        [(e.name, json.loads(e.arguments)) for e in events if isinstance(e, CallDone)],
    )


def test_a_named_call_samples_only_valid_calls(compiler, tokenizer, ends):
    rng, grammar = random.Random(1), compiler.calls(SPEC, [WEATHER])
    for _ in range(25):
        text = tokenizer.decode(sample(grammar.matcher(), ends, rng), skip_special_tokens=False)
        _, calls = calls_in(text)
        assert len(calls) == 1 and calls[0][0] == "get_weather"
        jsonschema.validate(calls[0][1], WEATHER["parameters"])
        assert text == SPEC.render_call("get_weather", json.dumps(calls[0][1], ensure_ascii=False))


def test_required_with_parallel_calls_samples_only_valid_calls(compiler, tokenizer, ends):
    rng, grammar, seen = (
        random.Random(2),
        compiler.calls(SPEC, [WEATHER, TIME], parallel=True),
        set(),
    )
    for _ in range(25):
        text, calls = calls_in(
            tokenizer.decode(sample(grammar.matcher(), ends, rng), skip_special_tokens=False)
        )
        assert text == "" and calls
        for name, args in calls:
            jsonschema.validate(args, SCHEMAS[name])
            seen.add(name)
    assert seen == {"get_weather", "get_time"}


def test_auto_is_free_text_until_a_call_opens(compiler, tokenizer, ends):
    rng, grammar, called = random.Random(3), compiler.auto(SPEC, [WEATHER, TIME], parallel=False), 0
    for _ in range(10):
        ids = sample(grammar.matcher(), ends, rng, prefer=(SPEC.open_id,) + STOPS)
        _, calls = calls_in(tokenizer.decode(ids, skip_special_tokens=False))
        assert ids.count(SPEC.open_id) == len(calls) <= 1
        for name, args in calls:
            jsonschema.validate(args, SCHEMAS[name])
        called += len(calls)
    assert called > 0


def test_json_schema_and_json_object_sample_only_valid_json(compiler, tokenizer, ends):
    rng = random.Random(4)
    for grammar, schema in (
        (compiler.json_schema(TIME["parameters"]), TIME["parameters"]),
        (compiler.json_object(), {"type": "object"}),
    ):
        for _ in range(10):
            jsonschema.validate(
                json.loads(tokenizer.decode(sample(grammar.matcher(), ends, rng))), schema
            )


def test_thinking_is_free_then_the_close_is_forced(compiler, tokenizer):
    r = FAMILY.reasoning
    wake = r.close_ids[r.close_ids.index(r.end_id) :]
    m, bitmask = compiler.json_object().matcher(wake=wake), allocate_bitmask(1, VOCAB)
    for token in tokenizer.encode("free reasoning {", add_special_tokens=False).ids + [r.end_id]:
        m.fill_bitmask(bitmask)
        assert (bitmask == -1).all() and m.accept(token)
    m.fill_bitmask(bitmask)
    assert torch.isfinite(apply_bitmask(torch.zeros(1, VOCAB), bitmask)).nonzero()[
        :, 1
    ].tolist() == [wake[1]]
    assert m.accept(wake[1]) and not m.accept(tokenizer.token_to_id("x"))


def test_a_grammar_is_compiled_once_per_tokenizer(compiler, tokenizer):
    tool, before = dict(WEATHER, name="cached"), compiler.compiled
    first = compiler.calls(SPEC, [tool])
    assert compiler.calls(SPEC, [dict(tool)]) is first and compiler.compiled == before + 1
    assert compiler.json_schema(tool["parameters"]) is not first and compiler.compiled == before + 2
    other = GrammarCompiler(tokenizer.to_str(), VOCAB + 64, STOPS)
    assert other.calls(SPEC, [tool]).key == first.key  # same tokenizer and grammar, same key
    a, b = first.matcher(), first.matcher()
    assert (
        a.accept(SPEC.open_id) and not b.finished and b.accept(SPEC.open_id)
    )  # states are separate


def test_a_schema_that_cannot_compile_is_a_typed_error(compiler):
    with pytest.raises(GrammarError, match="does not compile"):
        compiler.json_schema({"type": "object", "properties": {"a": {"type": "no-such-type"}}})
    with pytest.raises(GrammarError, match="at least one tool"):
        compiler.calls(SPEC, [])


def test_a_batchs_masks_filled_at_once_equal_each_row_filled_alone(compiler, tokenizer):
    """`fill_bitmasks` (every row's mask on llguidance's threads, as the engine fills a step's
    constrained rows) gives each row what filling it alone gives: matchers at different places of
    different grammars, one still thinking (every token) and one with a forced token, in rows of
    a batch that has an unconstrained row too (left all-allowed)."""
    from qualflow.runtime.engine.grammar import fill_bitmasks

    r = FAMILY.reasoning
    wake = r.close_ids[r.close_ids.index(r.end_id) :]
    opened = compiler.json_schema(WEATHER["parameters"]).matcher()
    for token in tokenizer.encode('{"city": "Par', add_special_tokens=False).ids:
        assert opened.accept(token)
    forced = compiler.json_object().matcher(wake=wake)
    assert forced.accept(wake[0])  # the think block ended: its close is forced next
    rows = [
        (compiler.calls(SPEC, [WEATHER, TIME], parallel=True).matcher(), 0),
        (opened, 1),
        (compiler.json_object().matcher(wake=wake), 3),  # still thinking
        (forced, 4),
    ]
    together = allocate_bitmask(5, VOCAB)
    fill_bitmasks(rows, together)
    for matcher, row in rows:
        alone = allocate_bitmask(5, VOCAB)
        matcher.fill_bitmask(alone, row)
        assert torch.equal(together[row], alone[row]), row
    assert (together[2] == -1).all()  # the unconstrained row
    assert not (together[1] == -1).all() and not (together[0] == -1).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the lent GPU)")
def test_a_gpu_mask_is_queued_without_waiting_for_the_device():
    # A pageable bitmask's copy waits for everything queued before it (the step's forward): the
    # engine's host then cannot run ahead of the device for that step. Pinned, nothing waits.
    logits = torch.zeros(4, VOCAB, device="cuda")
    bitmask = allocate_bitmask(4, VOCAB, pinned=True)
    bitmask[:, 1:] = 0  # tokens 0-31 allowed
    torch.cuda.set_sync_debug_mode("error")
    try:
        apply_bitmask(logits, bitmask)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert torch.isfinite(logits).sum(dim=1).tolist() == [32] * 4


def _random_mask(rows: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    words = allocate_bitmask(rows, VOCAB)
    return words.copy_(torch.randint(-(2**31), 2**31, words.shape, generator=g, dtype=torch.int64))


def test_a_mask_touches_its_rows_only_and_clears_exactly_the_refused_tokens():
    logits, mask = torch.randn(5, VOCAB), _random_mask(2, 0)
    out = apply_bitmask(logits.clone(), mask, [3, 1])
    for row, i in ((3, 0), (1, 1)):
        bits = [(int(mask[i, t // 32]) >> (t % 32)) & 1 for t in range(VOCAB)]
        assert torch.isinf(out[row]).tolist() == [b == 0 for b in bits]
    for row in (0, 2, 4):
        assert torch.equal(out[row], logits[row])
    with pytest.raises(ValueError, match="2 rows for a bitmask of 1"):
        apply_bitmask(logits, mask[:1], [0, 1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the lent GPU)")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_gpu_mask_kernel_equals_the_reference(dtype):
    from qualflow.runtime.kernels import token_mask

    if not token_mask.usable(torch.zeros(1, device="cuda")):
        pytest.skip("no Triton here")
    logits = torch.randn(64, VOCAB, device="cuda", dtype=dtype)
    mask = _random_mask(32, 1).cuda()
    rows = torch.randperm(64, generator=torch.Generator().manual_seed(2))[:32].int().cuda()
    want, got = logits.clone(), logits.clone()
    token_mask.reference(want, mask, rows)
    token_mask.apply(got, mask, rows)
    assert torch.equal(want, got)
