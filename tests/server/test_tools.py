"""Function tools and structured output over real uvicorn, driven by the real (pinned) openai SDK:
calls as `function_call` items (plain and streamed, events in OpenAI's order, markers never in
text), constrained to their schema, a `function_call_output` round trip, `parallel_tool_calls`,
`text.format` json_schema / json_object, and the rejections (each naming its field)."""

from __future__ import annotations

import json

import httpx
import jsonschema
import openai
import pytest

from fixtures.server import ServerUnderTest

MODEL = "qualflow-test"
pytestmark = pytest.mark.timeout(600)
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "strict": True,
    "parameters": {
        "type": "object",
        "additionalProperties": False,
        "required": ["city", "days"],
        "properties": {
            "city": {"enum": ["Paris", "Oslo", "Lima"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 9},
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
        "required": ["zone"],
        "properties": {"zone": {"enum": ["UTC", "CET"]}},
    },
}
SCHEMAS = {t["name"]: t["parameters"] for t in (WEATHER, TIME)}


@pytest.fixture(scope="module")
def srv(bundle_dir, tmp_path_factory):
    s = ServerUnderTest(bundle_dir, tmp_path_factory.mktemp("tools"), model_name=MODEL).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(srv):
    return srv.client()


def ask(client, **kw):
    kw.setdefault("input", "What is the weather in Paris?")
    return client.responses.create(model=MODEL, max_output_tokens=80, **kw)


def calls_of(resp) -> list:
    return [i for i in resp.output if i.type == "function_call"]


def assert_valid_call(call) -> None:
    assert call.id.startswith("fc_") and call.call_id.startswith("call_")
    assert call.status == "completed"
    jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])


def test_health_lists_the_tools_capability(srv):
    caps = httpx.get(srv.url + "/health", timeout=10).json()
    assert "tools" in json.dumps(caps)


def test_required_gives_schema_valid_calls(client):
    for seed_text in ("Paris?", "Oslo, tomorrow", "time in CET", "both please"):
        resp = ask(client, input=seed_text, tools=[WEATHER, TIME], tool_choice="required")
        calls = calls_of(resp)
        assert resp.status == "completed" and calls
        for call in calls:
            assert_valid_call(call)
        assert resp.usage.output_tokens > 0
        assert all(
            "<tool_call>" not in getattr(i, "content", [None])[0].text
            for i in resp.output
            if i.type == "message" and i.content
        )


def test_named_choice_calls_that_function_once(client):
    resp = ask(client, tools=[WEATHER, TIME], tool_choice={"type": "function", "name": "get_time"})
    calls = calls_of(resp)
    assert [c.name for c in calls] == ["get_time"]
    assert_valid_call(calls[0])


def test_parallel_false_gives_at_most_one_call(client):
    for text in ("a", "b", "c"):
        resp = ask(
            client,
            input=text,
            tools=[WEATHER, TIME],
            tool_choice="required",
            parallel_tool_calls=False,
        )
        assert len(calls_of(resp)) == 1


def test_stream_events_in_openai_order(client, srv):
    with client.responses.stream(
        model=MODEL,
        input="weather?",
        max_output_tokens=80,
        tools=[WEATHER],
        tool_choice="required",
        extra_headers={"X-Request-ID": "tools-stream"},
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "response.content_part.added" not in kinds
    assert not any(e.type == "response.output_text.delta" for e in events)
    added = kinds.index("response.output_item.added")
    first = events[added]
    assert first.item.type == "function_call" and first.item.status == "in_progress"
    assert first.item.arguments == ""
    deltas = [e for e in events if e.type == "response.function_call_arguments.delta"]
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert len(deltas) > 1  # streamed as generated, not in one piece
    for d in done:
        pieces = "".join(x.delta for x in deltas if x.output_index == d.output_index)
        assert pieces == d.arguments and d.name == "get_weather"
    item_done = [e for e in events if e.type == "response.output_item.done"]
    assert [e.output_index for e in item_done] == list(range(len(item_done)))
    assert all(e.item.status == "completed" for e in item_done)
    for call in calls_of(final):
        assert_valid_call(call)
    record = srv.wait_record("tools-stream")
    assert record["tool_calls"] == len(calls_of(final)) > 0
    assert record["output_tokens"] == final.usage.output_tokens


def test_function_call_output_round_trip(client):
    first = ask(client, tools=[WEATHER], tool_choice="required", parallel_tool_calls=False)
    call = calls_of(first)[0]
    follow = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
        },
        {"type": "function_call_output", "call_id": call.call_id, "output": '{"temp": 21}'},
    ]
    resp = ask(client, input=follow, tools=[WEATHER], tool_choice="none")
    assert resp.status in ("completed", "incomplete")
    assert resp.output[0].type == "message" and not calls_of(resp)


def test_auto_completes_an_agent_loop(client):
    """The embedded default with `tool_choice: auto` (families/qwen3/tool_trigger.py): offered
    tools, it calls one (plain and streamed); given the call's output, it answers in text."""
    question = "What is the weather in Paris?"
    first = ask(client, input=question, tools=[WEATHER, TIME], tool_choice="auto")
    calls = calls_of(first)
    assert first.status == "completed" and len(calls) == 1, first.output
    assert_valid_call(calls[0])
    assert not [i for i in first.output if i.type == "message"]
    with client.responses.stream(
        model=MODEL, input=question, max_output_tokens=80, tools=[WEATHER, TIME]
    ) as stream:
        kinds = [e.type for e in stream]
        streamed = stream.get_final_response()
    assert "response.function_call_arguments.done" in kinds and len(calls_of(streamed)) == 1
    call = calls[0]
    follow = [
        {"role": "user", "content": question},
        {
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
        },
        {"type": "function_call_output", "call_id": call.call_id, "output": '{"temp": 21}'},
    ]
    answer = ask(client, input=follow, tools=[WEATHER, TIME], tool_choice="auto")
    assert answer.status == "completed" and not calls_of(answer)
    assert answer.output[-1].type == "message" and answer.output_text.strip()
    plain = ask(client, input=question)  # no tools offered: text, as before
    assert plain.status == "completed" and not calls_of(plain) and plain.output_text


def test_json_schema_output_validates(client):
    schema = SCHEMAS["get_weather"]
    for text in ("one", "two", "three"):
        resp = ask(
            client,
            input=text,
            text={"format": {"type": "json_schema", "name": "w", "schema": schema, "strict": True}},
        )
        jsonschema.validate(json.loads(resp.output_text), schema)


def test_json_object_output_parses(client):
    resp = client.responses.create(
        model=MODEL, input="json", max_output_tokens=400, text={"format": {"type": "json_object"}}
    )
    assert resp.output_text.startswith("{")


@pytest.mark.parametrize(
    "kw, param",
    [
        (dict(tools=[{"type": "web_search"}]), "tools[0].type"),
        (
            dict(tools=[WEATHER], tool_choice={"type": "function", "name": "nope"}),
            "tool_choice.name",
        ),
        (dict(tools=[{**WEATHER, "parameters": {"type": "array"}}]), "tools[0].parameters"),
        (dict(tools=[{**WEATHER, "parameters": [1]}]), "tools[0].parameters"),
        (dict(tool_choice="required"), "tool_choice"),
        (dict(tools=[WEATHER, WEATHER]), "tools[1].name"),
        (
            dict(input=[{"type": "function_call_output", "call_id": "call_x", "output": "1"}]),
            "input[0].call_id",
        ),
        (dict(text={"format": {"type": "json_schema", "name": "x"}}), "text.format.schema"),
    ],
)
def test_rejections_name_the_field(client, kw, param):
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, **kw)
    assert e.value.status_code == 400 and e.value.body["param"] == param
