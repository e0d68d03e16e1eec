"""The OpenAI Agents SDK (openai-agents, OpenAIResponsesModel) continuing a stored response with
`previous_response_id`, over a real `qualflow serve --store` (SQLite) on the embedded default."""

from __future__ import annotations

import asyncio

import openai
import pytest

from fixtures.stateful import client, model_of, stateful_server

pytestmark = pytest.mark.timeout(300)
INSTRUCTIONS = "Answer briefly."
TOKENS = 80  # the embedded default ends its turn (<|im_end|>) well within this: a completed turn


@pytest.fixture(scope="module")
def srv(bundle_dir, tmp_path_factory):
    work = tmp_path_factory.mktemp("agents")
    s = stateful_server(bundle_dir, work, str(work / "store.db")).start()
    yield s
    s.stop()


def agent_turns(srv, model: str):
    """Two Runner.run turns of one Agent: "one two three", then "next" continuing the first by
    its last_response_id."""
    from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)
    sdk = openai.AsyncOpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0)
    agent = Agent(
        name="brief",
        instructions=INSTRUCTIONS,
        model=OpenAIResponsesModel(model=model, openai_client=sdk),
        model_settings=ModelSettings(max_tokens=TOKENS),
    )

    async def run():
        first = await Runner.run(agent, "one two three")
        then = await Runner.run(agent, "next", previous_response_id=first.last_response_id)
        return first, then

    return asyncio.run(run())


def test_the_agents_sdk_continues_a_stored_response(srv):
    """The continuation completes, and its prompt, as the engine got it, is exactly the chain:
    the same input tokens as the first turn's stored input and output, then "next", sent whole."""
    model = model_of(srv)
    first, then = agent_turns(srv, model)
    c = client(srv)
    r1 = c.responses.retrieve(first.last_response_id)
    r2 = c.responses.retrieve(then.last_response_id)
    assert r1.status == r2.status == "completed" and r2.previous_response_id == r1.id
    assert then.final_output == r2.output_text
    own = [
        i.model_dump(exclude_none=True)
        for i in c.responses.input_items.list(r2.id, order="asc").data
    ]
    assert [i["content"][0]["text"] for i in own] == ["next"]  # the SDK sent the new turn only
    chain = [
        *(
            i.model_dump(exclude_none=True)
            for i in c.responses.input_items.list(r1.id, order="asc").data
        ),
        *(o.model_dump(exclude_none=True) for o in r1.output),
        *own,
    ]
    assert [i["content"][0]["text"] for i in chain[:1]] == ["one two three"]

    def prompt_tokens(inp) -> int:
        r = c.responses.create(
            model=model, instructions=INSTRUCTIONS, input=inp, max_output_tokens=1, store=False
        )
        return r.usage.input_tokens

    assert r2.usage.input_tokens == prompt_tokens(chain)
    assert r2.usage.input_tokens > prompt_tokens("next") + r1.usage.output_tokens
