"""qwen3 prompts with function tools, calls and tool outputs: token for token what transformers'
`apply_chat_template(messages, tools=…)` gives with the embedded default's chat template, for the
same conversation written as chat messages; and the tool-call format as family data."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from qualflow.families import get_family
from qualflow.families.tools import no_tools_reason

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather <now> in a city, «vite»",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
    "strict": True,
}
TIME = {
    "type": "function",
    "name": "get_time",
    "description": None,
    "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
    "strict": False,
}
HF_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": WEATHER["description"],
            "parameters": WEATHER["parameters"],
        },
    },
    {"type": "function", "function": {"name": "get_time", "parameters": TIME["parameters"]}},
]


def call(call_id, name, arguments):
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def output(call_id, text):
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def hf_call(name, arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


PARIS, TOKYO = '{"city": "Paris"}', '{"city": "Tokyo"}'
# (input items, the same conversation as chat messages), both after the system turn
CASES = {
    "tools only": (
        [{"role": "user", "content": "Weather in Paris?"}],
        [{"role": "user", "content": "Weather in Paris?"}],
    ),
    "a call and its output": (
        [
            {"role": "user", "content": "Weather in Paris?"},
            call("c1", "get_weather", PARIS),
            output("c1", "sunny, 21 C"),
        ],
        [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [hf_call("get_weather", PARIS)]},
            {"role": "tool", "content": "sunny, 21 C"},
        ],
    ),
    "parallel calls, outputs merged": (
        [
            {"role": "user", "content": "Paris and Tokyo?"},
            call("c1", "get_weather", PARIS),
            call("c2", "get_weather", TOKYO),
            output("c1", "sunny"),
            output("c2", "rain"),
        ],
        [
            {"role": "user", "content": "Paris and Tokyo?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [hf_call("get_weather", PARIS), hf_call("get_weather", TOKYO)],
            },
            {"role": "tool", "content": "sunny"},
            {"role": "tool", "content": "rain"},
        ],
    ),
    "text then a call": (
        [
            {"role": "user", "content": "Time?"},
            {"role": "assistant", "content": "Let me check."},
            call("c1", "get_time", '{"tz": "UTC"}'),
            output("c1", "12:00"),
        ],
        [
            {"role": "user", "content": "Time?"},
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [hf_call("get_time", '{"tz": "UTC"}')],
            },
            {"role": "tool", "content": "12:00"},
        ],
    ),
    "multi-turn": (
        [
            {"role": "user", "content": "Paris?"},
            call("c1", "get_weather", PARIS),
            output("c1", "sunny"),
            {"role": "assistant", "content": "<think>\nok\n</think>\n\nIt is sunny."},
            {"role": "user", "content": "And Tokyo?"},
            call("c2", "get_weather", TOKYO),
            output("c2", "rain"),
        ],
        [
            {"role": "user", "content": "Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [hf_call("get_weather", PARIS)]},
            {"role": "tool", "content": "sunny"},
            {"role": "assistant", "content": "<think>\nok\n</think>\n\nIt is sunny."},
            {"role": "user", "content": "And Tokyo?"},
            {"role": "assistant", "content": "", "tool_calls": [hf_call("get_weather", TOKYO)]},
            {"role": "tool", "content": "rain"},
        ],
    ),
}


@pytest.fixture(scope="module")
def hf(embedded_dir):
    from transformers import AutoTokenizer

    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    return AutoTokenizer.from_pretrained(str(embedded_dir))


@pytest.fixture(scope="module")
def template(embedded_dir):
    return json.loads((embedded_dir / "tokenizer_config.json").read_text())["chat_template"]


@pytest.mark.parametrize("thinking", [False, True], ids=["thinking off", "thinking on"])
@pytest.mark.parametrize("system", [None, "Be brief."], ids=["no system", "system"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_renders_as_transformers_does(hf, template, case, system, thinking):
    items, chat = CASES[case]
    family = get_family("qwen3")
    ours = family.render_prompt(
        hf.backend_tokenizer, template, system, items, thinking=thinking, tools=[WEATHER, TIME]
    )
    chat = ([{"role": "system", "content": system}] if system else []) + chat
    ref = hf.apply_chat_template(
        chat, tools=HF_TOOLS, tokenize=False, add_generation_prompt=True, enable_thinking=thinking
    )
    ref_ids = hf(ref, add_special_tokens=False).input_ids
    assert ours == ref_ids + (list(family.reasoning.open_ids) if thinking else [])


def test_the_prompt_has_the_tools_block_and_calls_in_the_qwen3_format(hf, template):
    items, _ = CASES["parallel calls, outputs merged"]
    text = hf.decode(
        get_family("qwen3").render_prompt(
            hf.backend_tokenizer, template, "Be brief.", items, tools=[WEATHER]
        )
    )
    schema = json.dumps(HF_TOOLS[0], ensure_ascii=False)
    assert text.startswith(
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to "
        "assist with the user query.\n\nYou are provided with function signatures within "
        f"<tools></tools> XML tags:\n<tools>\n{schema}\n</tools>\n\n"
    )
    assert (
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
        "<|im_end|>\n<|im_start|>user\nParis and Tokyo?<|im_end|>\n"
    ) in text
    spec = get_family("qwen3").tool_calls
    calls = spec.render_call("get_weather", PARIS) + "\n" + spec.render_call("get_weather", TOKYO)
    assert (
        f"<|im_start|>assistant\n{calls}<|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n"
        "</tool_response>\n<tool_response>\nrain\n</tool_response><|im_end|>\n"
    ) in text


def test_without_tools_the_prompt_is_unchanged(hf, template):
    msgs = [{"role": "user", "content": "Hi"}]
    ours = get_family("qwen3").render_prompt(hf.backend_tokenizer, template, "Be brief.", msgs)
    ref = hf.apply_chat_template(
        [{"role": "system", "content": "Be brief."}] + msgs,
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=False,
    )
    assert ours == hf(ref, add_special_tokens=False).input_ids and "# Tools" not in ref


def test_the_markers_are_the_tokenizers(hf):
    spec = get_family("qwen3").tool_calls
    assert spec.tokenizer_mismatch(hf.backend_tokenizer.id_to_token) is None
    assert hf(spec.open + spec.close, add_special_tokens=False).input_ids == [
        spec.open_id,
        spec.close_id,
    ]
    moved = dataclasses.replace(spec, open_id=spec.open_id + 1)
    assert "<tool_call>" in moved.tokenizer_mismatch(hf.backend_tokenizer.id_to_token)


def test_a_family_without_a_tool_format_says_why(hf, template):
    family = dataclasses.replace(get_family("qwen3"), tool_calls=None)
    assert no_tools_reason(get_family("qwen3")) is None
    assert no_tools_reason(family) == "the qwen3 family declares no tool-call format"
    with pytest.raises(ValueError, match="no tool-call format"):
        family.render_prompt(
            hf.backend_tokenizer,
            template,
            None,
            [{"role": "user", "content": "x"}],
            tools=[WEATHER],
        )
