"""The tool-call parser of a request's answer text: message text outside calls (never a marker),
each call's name, its arguments as they are generated, then done or invalid; the same calls and the
same text whatever pieces the output arrives in."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qualflow.families.tools import ToolCallSpec
from qualflow.runtime.api.tool_calls import (
    CallArguments,
    CallDone,
    CallInvalid,
    CallName,
    CallStarted,
    ToolText,
)
from qualflow.runtime.frontend.tool_calls import ToolCallParser

SPEC = ToolCallSpec(open="<tool_call>", close="</tool_call>", open_id=151657, close_id=151658)


def parse(pieces) -> list:
    p = ToolCallParser(SPEC)
    events = [e for piece in pieces for e in p.push(piece)]
    return events + p.finish()


def summary(events) -> tuple[str, list]:
    """(the message text, per call: name, joined argument deltas, done arguments or why invalid)."""
    text = "".join(e.text for e in events if isinstance(e, ToolText))
    calls = {}
    for e in events:
        if isinstance(e, CallStarted):
            calls[e.index] = {"name": None, "args": "", "end": None}
        elif isinstance(e, CallName):
            assert calls[e.index]["name"] is None and calls[e.index]["end"] is None
            calls[e.index]["name"] = e.name
        elif isinstance(e, CallArguments):
            assert calls[e.index]["name"] is not None and calls[e.index]["end"] is None
            calls[e.index]["args"] += e.delta
        elif isinstance(e, CallDone):
            assert (e.name, e.arguments) == (calls[e.index]["name"], calls[e.index]["args"])
            calls[e.index]["end"] = ("done", e.arguments)
        elif isinstance(e, CallInvalid):
            calls[e.index]["end"] = ("invalid", e.reason.split(":")[0])
    return text, [calls[i] for i in sorted(calls)]


def test_text_then_a_call():
    out = "Let me check.\n" + SPEC.render_call("get_weather", '{"city": "Paris"}')
    events = parse([out])
    assert events[0] == ToolText("Let me check.")
    assert events[1:3] == [CallStarted(0), CallName(0, "get_weather")]
    assert events[-1] == CallDone(0, "get_weather", '{"city": "Paris"}')
    assert all("tool_call" not in e.text for e in events if isinstance(e, ToolText))


def test_arguments_stream_before_the_call_closes():
    out = SPEC.render_call("f", '{"text": "a long argument, written over many tokens"}')
    p, seen = ToolCallParser(SPEC), []
    for ch in out[: -len(SPEC.close)]:
        seen += p.push(ch)
    deltas = [e.delta for e in seen if isinstance(e, CallArguments)]
    assert (
        len(deltas) > 10
        and "".join(deltas) == '{"text": "a long argument, written over many tokens"}'
    )
    assert not any(isinstance(e, CallDone) for e in seen)
    assert p.push(SPEC.close)[-1] == CallDone(0, "f", "".join(deltas))


def test_parallel_calls_and_the_separators_are_not_text():
    out = (
        SPEC.render_call("a", '{"x": 1}')
        + "\n"
        + SPEC.render_call("b", '{"y": [1, {"z": "}"}]}')
        + "\n"
    )
    text, calls = summary(parse([out]))
    assert text == ""
    assert [(c["name"], c["end"]) for c in calls] == [
        ("a", ("done", '{"x": 1}')),
        ("b", ("done", '{"y": [1, {"z": "}"}]}')),
    ]


@pytest.mark.parametrize(
    "body,reason",
    [
        ('\n{"name": "f", "arguments": {"x": 1}\n', "the call's payload is not valid JSON"),
        (
            '\n{"name": "f"}\n',
            "the call's payload must be a JSON object with exactly the keys ['arguments', 'name']",
        ),
        ('\n{"name": "f", "arguments": "x"}\n', "the call's 'arguments' must be a JSON object"),
        ("\nnot json\n", "the call's payload is not valid JSON"),
    ],
)
def test_an_invalid_payload_is_reported_typed(body, reason):
    events = parse(["ok ", SPEC.open + body + SPEC.close, " after"])
    invalid = [e for e in events if isinstance(e, CallInvalid)]
    assert len(invalid) == 1 and invalid[0].reason.startswith(reason) and invalid[0].raw == body
    assert "".join(e.text for e in events if isinstance(e, ToolText)) == "okafter"


def test_keys_in_another_order_still_give_the_call():
    events = parse([SPEC.open + '\n{"arguments": {"q": "x"}, "name": "search"}\n' + SPEC.close])
    assert events[-3:] == [
        CallName(0, "search"),
        CallArguments(0, '{"q": "x"}'),
        CallDone(0, "search", '{"q": "x"}'),
    ]


def test_the_output_ending_inside_a_call():
    complete = SPEC.open + '\n{"name": "f", "arguments": {"x": 1}}'
    assert parse([complete])[-1] == CallDone(0, "f", '{"x": 1}')
    cut = parse([SPEC.open + '\n{"name": "f", "arguments": {"x": '])[-1]
    assert isinstance(cut, CallInvalid) and cut.reason.startswith(
        "the output ended inside the call"
    )


def test_text_that_only_looks_like_a_marker_is_text():
    assert summary(parse(["a <tool", "_cal", "l is not </tool_call> here <tool"])) == (
        "a <tool_call is not </tool_call> here <tool",
        [],
    )


def test_with_thinking_the_calls_follow_the_reasoning():
    """Token ids through the think split (frontend/reasoning.py), the answer through the parser."""
    from tokenizers import Tokenizer

    from qualflow.families import get_family
    from qualflow.families.qwen3.synthetic import tokenizer_json
    from qualflow.runtime.frontend.reasoning import ThinkSplit

    tok, family = Tokenizer.from_str(tokenizer_json()), get_family("qwen3")
    call = family.tool_calls.render_call("get_weather", '{"city": "Paris"}')
    ids = tok.encode("I should call the tool.\n</think>\n\n" + call, add_special_tokens=False).ids
    assert family.tool_calls.open_id in ids and family.reasoning.end_id in ids
    split, parser, reasoning, events = (
        ThinkSplit(tok, family.reasoning.end_id),
        ToolCallParser(family.tool_calls),
        "",
        [],
    )
    for i in ids:
        r, answer = split.push([i])
        reasoning += r
        events += parser.push(answer)
    events += parser.push(split.flush()[1]) + parser.finish()
    assert reasoning == "I should call the tool.\n"
    assert summary(events) == (
        "",
        [
            {
                "name": "get_weather",
                "args": '{"city": "Paris"}',
                "end": ("done", '{"city": "Paris"}'),
            }
        ],
    )


TEXT = (
    st.text(st.sampled_from(list('ab <>/_tolc\n{}"é')), min_size=1, max_size=12)
    .map(str.strip)
    .filter(lambda t: t and SPEC.open not in t)
)
ARGS = st.dictionaries(
    st.text(max_size=5),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=6),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=6,
    ),
    max_size=4,
)
SEGMENT = st.one_of(TEXT, st.tuples(st.sampled_from(["f", "get_weather", "é_x"]), ARGS))


@settings(max_examples=300, deadline=None)
@given(st.lists(SEGMENT, max_size=5), st.data())
def test_any_split_gives_the_same_calls_and_text(segments, data):
    parts, expected_calls = [], []
    for seg in segments:
        if isinstance(seg, str):
            parts.append(seg)
        else:
            args = json.dumps(seg[1], ensure_ascii=False)
            parts.append(SPEC.render_call(seg[0], args))
            expected_calls.append({"name": seg[0], "args": args, "end": ("done", args)})
    out = "\n".join(parts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(out)), max_size=12)))
    pieces = [out[a:b] for a, b in zip([0] + cuts, cuts + [len(out)], strict=True)]
    whole = summary(parse([out]))
    assert summary(parse(pieces)) == whole
    assert whole[1] == expected_calls
    texts = [s for s in segments if isinstance(s, str)]
    if not expected_calls:
        assert whole[0] == "\n".join(texts)
    else:
        assert whole[0].replace("\n", "") == "".join(texts).replace("\n", "")
