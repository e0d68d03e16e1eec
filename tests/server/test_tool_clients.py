"""Tool-calling clients against the embedded default over real uvicorn (CPU): an OpenAI Agents SDK
agent with one function tool completes call -> tool output -> final answer (plain and streamed),
and the two tool-calling cases of the Open Responses compliance suite pass.

The Open Responses cases' `location` is a free-form string: the embedded default closes it a few
tokens in (its string closer, families/qwen3/string_closer.py), so their calls complete."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Literal

import httpx
import jsonschema
import pytest
from openai.types.responses import Response
from pydantic import Field

from fixtures.published_schemas import assert_valid, event_problems, response_problems
from fixtures.server import ServerUnderTest
from fixtures.sse import sse_frames

MODEL = "qualflow-test"
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def srv(bundle_dir, tmp_path_factory):
    s = ServerUnderTest(bundle_dir, tmp_path_factory.mktemp("tool-clients"), model_name=MODEL)
    s.start()
    yield s
    s.stop()


# ---- the OpenAI Agents SDK ------------------------------------------------------------------


def weather_agent(url: str):
    """An agent on our server through OpenAIResponsesModel, with one function tool that records
    the arguments it is called with."""
    from agents import Agent, ModelSettings, OpenAIResponsesModel, function_tool
    from openai import AsyncOpenAI

    seen: list[dict] = []

    @function_tool
    def get_weather(
        city: Literal["Paris", "Oslo", "Lima"], days: Annotated[int, Field(ge=1, le=7)]
    ) -> str:
        """The weather forecast of a city for the next days."""
        seen.append({"city": city, "days": days})
        return json.dumps({"city": city, "forecast": "sunny", "temp_c": 21})

    client = AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
    agent = Agent(
        name="weather",
        instructions="Answer with the weather tool.",
        model=OpenAIResponsesModel(MODEL, openai_client=client),
        model_settings=ModelSettings(max_tokens=80),
        tools=[get_weather],
    )
    return agent, get_weather, seen


def assert_call_output_answer(result, tool, seen: list[dict]) -> None:
    """The run's items: a call whose arguments validate against the tool's schema, the tool's
    output, then a text answer (the final output) after it."""
    kinds = [item.type for item in result.new_items]
    assert kinds[:2] == ["tool_call_item", "tool_call_output_item"], kinds
    assert kinds[-1] == "message_output_item", kinds
    call = result.new_items[0].raw_item
    assert call.name == "get_weather"
    arguments = json.loads(call.arguments)
    jsonschema.validate(arguments, tool.params_json_schema)
    assert seen == [arguments]  # the tool really ran, with the call's arguments
    assert result.new_items[1].raw_item["call_id"] == call.call_id
    assert isinstance(result.final_output, str) and result.final_output.strip()
    assert result.final_output == result.new_items[-1].raw_item.content[0].text


def test_agents_sdk_agent_calls_its_tool_then_answers(srv):
    from agents import Runner, set_tracing_disabled

    set_tracing_disabled(True)
    agent, tool, seen = weather_agent(srv.url)
    result = asyncio.run(Runner.run(agent, "What is the weather in Paris this week?"))
    assert_call_output_answer(result, tool, seen)
    assert len(result.raw_responses) == 2  # one model turn for the call, one for the answer


def test_agents_sdk_streamed_run(srv):
    from agents import Runner, set_tracing_disabled

    set_tracing_disabled(True)
    agent, tool, seen = weather_agent(srv.url)

    async def run():
        result = Runner.run_streamed(agent, "What is the weather in Oslo tomorrow?")
        raw = [e.data.type async for e in result.stream_events() if e.type == "raw_response_event"]
        return result, raw

    result, raw = asyncio.run(run())
    assert_call_output_answer(result, tool, seen)
    assert "response.function_call_arguments.delta" in raw
    assert "response.output_text.delta" in raw
    assert raw.index("response.function_call_arguments.done") < raw.index(
        "response.output_text.delta"
    )


# ---- the Open Responses compliance suite's tool-calling cases -------------------------------

WEATHER_CASE = {
    "model": MODEL,
    "input": [
        {"type": "message", "role": "user", "content": "What's the weather like in San Francisco?"}
    ],
    "tools": [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Get the current weather for a location",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {
                        "type": "string",
                        "description": "The city and state, e.g. San Francisco, CA",
                    }
                },
                "required": ["location"],
            },
        }
    ],
    # not in the cases' requests, which leave it to the server (here: the context's 3,072 tokens): a
    # bound, so that a string that ran on would end the response `incomplete` rather than hang
    "max_output_tokens": 128,
}


def assert_weather_response(data: dict) -> None:
    """What the cases check of the response (output not empty, a function_call among it), and that
    it validates as openai-python's Response and under both published types, strictly."""
    assert data["output"], data
    calls = [item for item in data["output"] if item["type"] == "function_call"]
    assert calls, data["output"]
    assert calls[0]["name"] == "get_weather"
    assert data["status"] == "completed", data
    arguments = json.loads(calls[0]["arguments"])
    assert isinstance(arguments["location"], str) and arguments["location"], arguments
    Response.model_validate(data)
    assert_valid(response_problems(data), "the response")


def test_openresponses_tool_calling(srv):
    """The Open Responses compliance case `tool-calling` (openresponses/openresponses,
    src/lib/compliance-tests.ts): the user asks for San Francisco's weather with one function tool
    `get_weather` offered (no tool_choice: `auto`); the output is not empty and holds a
    function_call item."""
    r = httpx.post(srv.url + "/v1/responses", json={**WEATHER_CASE, "stream": False}, timeout=300)
    assert r.status_code == 200, r.text
    assert_weather_response(r.json())


def test_openresponses_tool_calling_streaming(srv):
    """The Open Responses compliance case `tool-calling-streaming` (openresponses/openresponses,
    src/lib/compliance-tests.ts): the same request streamed; events come, among them
    `response.output_item.added` with a function_call item, `response.function_call_arguments.delta`
    and `.done`, and `response.output_item.done` with a function_call item; the final response (the
    terminal event's) passes the plain case's checks."""
    r = httpx.post(srv.url + "/v1/responses", json={**WEATHER_CASE, "stream": True}, timeout=300)
    assert r.status_code == 200, r.text
    frames = sse_frames(r.text)
    assert frames
    for kind, data in frames:
        found = event_problems(data)
        if kind == "response.function_call_arguments.done":
            # OpenAI's own streams carry the call's `name` here (a recorded stream of the issue);
            # neither published type declares it yet
            found["declared by neither"].remove("$.name")
        assert_valid(found, kind)
    kinds = [kind for kind, _ in frames]
    items = {
        kind: [d["item"]["type"] for k, d in frames if k == kind]
        for kind in ("response.output_item.added", "response.output_item.done")
    }
    assert "function_call" in items["response.output_item.added"], kinds
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds
    assert "function_call" in items["response.output_item.done"], kinds
    assert kinds[-1] == "response.completed", kinds
    assert_weather_response(frames[-1][1]["response"])
