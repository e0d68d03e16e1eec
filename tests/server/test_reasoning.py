"""Thinking through the Responses server (a real `qualflow serve` on the embedded default,
budgets of a few tokens via --reasoning-budgets, ignore_eos so the model's own stops never
decide): the reasoning item and events against the openai SDK's types, reasoning_tokens against
the server's timing record, truncation inside reasoning, the 400s, thinking off without
`reasoning`; and the protocol checks of session.reasoning_checks against it. The family without
the capability: a stand-in Task."""

from __future__ import annotations

import httpx
import pytest
from openai.types.responses import ResponseOutputMessage, ResponseReasoningItem

from fixtures.server import ServerUnderTest
from fixtures.sse import sse_frames

MODEL = "qualflow-test"
BUDGETS = {"minimal": 4, "low": 4, "medium": 6, "high": None}
pytestmark = pytest.mark.timeout(300)
EXT = {"extra_body": {"ignore_eos": True}}


@pytest.fixture(scope="module")
def srv(bundle_dir, tmp_path_factory):
    s = ServerUnderTest(
        bundle_dir,
        tmp_path_factory.mktemp("server"),
        "--reasoning-budgets",
        "4",
        "4",
        "6",
        "0",
        model_name=MODEL,
    ).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(srv):
    return srv.client()


def create(client, rid, **kw):
    kw.setdefault("max_output_tokens", 9)
    return client.responses.create(
        model=MODEL,
        input="Think, then answer.",
        store=False,
        extra_headers={"X-Request-ID": rid},
        **EXT,
        **kw,
    )


def test_health_names_the_capability_and_budgets(srv):
    h = httpx.get(srv.url + "/health").json()
    assert "reasoning" in h["capabilities"] and h["reasoning"] == {
        "budgets": BUDGETS,
        "default_effort": None,
    }


def test_non_stream_reasoning_item_then_message(srv, client):
    r = create(client, "rs-non-stream", reasoning={"effort": "minimal"})
    thought, msg = r.output
    assert isinstance(thought, ResponseReasoningItem) and isinstance(msg, ResponseOutputMessage)
    assert thought.id.startswith("rs_") and thought.summary == [] and thought.status == "completed"
    assert [c.type for c in thought.content] == [
        "reasoning_text"
    ] and "</think>" not in thought.content[0].text
    assert r.usage.output_tokens_details.reasoning_tokens == 4 and r.usage.output_tokens == 9
    assert (
        r.reasoning.effort == "minimal"
        and r.status == "incomplete"
        and r.output_text == msg.content[0].text
    )
    rec = srv.wait_record("rs-non-stream")
    assert (rec["reasoning_tokens"], rec["answer_tokens"], rec["output_tokens"]) == (4, 5, 9)
    assert rec["first_token_ns"] < rec["answer_first_token_ns"] <= rec["finished_ns"]


def test_stream_events_in_order_with_sequence_numbers_and_indexes(srv, client):
    with client.responses.stream(
        model=MODEL,
        input="Think, then answer.",
        reasoning={"effort": "medium"},
        max_output_tokens=10,
        store=False,
        extra_headers={"X-Request-ID": "rs-stream"},
        **EXT,
    ) as s:
        events = list(s)  # the SDK's helper checks each event's output_index against its snapshot
    types = [e.type for e in events]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    head = [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert types[:4] == head and events[2].item.type == "reasoning" and events[2].output_index == 0
    n = types.count("response.reasoning_text.delta")
    assert (
        n >= 2 and types[4 : 4 + n] == ["response.reasoning_text.delta"] * n
    )  # streamed as produced
    assert types[4 + n : 8 + n] == [
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
    ]
    assert events[7 + n].item.type == "message" and events[7 + n].output_index == 1
    assert (
        all(e.output_index == 1 for e in events[7 + n : -1]) and types[-1] == "response.incomplete"
    )
    final = events[-1].response
    reasoning = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert reasoning == events[4 + n].text == final.output[0].content[0].text
    assert final.output_text == "".join(
        e.delta for e in events if e.type == "response.output_text.delta"
    )
    assert (
        final.usage.output_tokens_details.reasoning_tokens
        == 6
        == srv.wait_record("rs-stream")["reasoning_tokens"]
    )


def test_truncated_inside_reasoning_is_incomplete_without_a_message(srv, client):
    r = create(client, "rs-cut", reasoning={"effort": "high"}, max_output_tokens=3)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert (
        [o.type for o in r.output] == ["reasoning"]
        and r.output[0].status == "incomplete"
        and r.output_text == ""
    )
    assert r.usage.output_tokens_details.reasoning_tokens == r.usage.output_tokens == 3
    rec = srv.wait_record("rs-cut")
    assert (rec["reasoning_tokens"], rec["answer_tokens"], rec["answer_first_token_ns"]) == (
        3,
        0,
        None,
    )
    raw = httpx.post(
        srv.url + "/v1/responses",
        json={
            "model": MODEL,
            "input": "x",
            "reasoning": {"effort": "high"},
            "max_output_tokens": 3,
            "stream": True,
            "ignore_eos": True,
        },
        timeout=60,
    ).text
    kinds = [k for k, _ in sse_frames(raw)]
    assert (
        kinds[-2:] == ["response.output_item.done", "response.incomplete"]
        and "response.output_text.delta" not in kinds
    )


@pytest.mark.parametrize(
    "reasoning", [None, {}, {"effort": None, "summary": None}, {"effort": "none"}]
)
def test_thinking_stays_off_without_an_effort(srv, client, reasoning):
    kw = {} if reasoning is None else {"reasoning": reasoning}
    r = create(client, "rs-off", max_output_tokens=4, **kw)
    assert [o.type for o in r.output] == [
        "message"
    ] and r.usage.output_tokens_details.reasoning_tokens == 0
    rec = srv.wait_record("rs-off")
    assert (rec["reasoning_tokens"], rec["answer_tokens"], rec["answer_first_token_ns"]) == (
        None,
        None,
        None,
    )


@pytest.mark.parametrize(
    "body,param,code",
    [
        (
            {"reasoning": {"effort": "low", "summary": "auto"}},
            "reasoning.summary",
            "unsupported_value",
        ),
        ({"reasoning": {"summary": "concise"}}, "reasoning.summary", "unsupported_value"),
        (
            {"reasoning": {"effort": "low", "generate_summary": "auto"}},
            "reasoning.generate_summary",
            "unsupported_value",
        ),
        (
            {"reasoning": {"effort": "low"}, "include": ["reasoning.encrypted_content"]},
            "include",
            "unsupported_value",
        ),
        ({"include": ["encrypted_content"]}, "include", "unsupported_value"),
        ({"reasoning": {"effort": "xhigh"}}, "reasoning.effort", "unsupported_value"),
        ({"reasoning": {"effort": "huge"}}, "reasoning.effort", "invalid_value"),
        ({"reasoning": {"effort": "low", "foo": 1}}, "reasoning.foo", "unknown_parameter"),
        (
            {"reasoning": {"effort": "low", "context": "all_turns"}},
            "reasoning.context",
            "unsupported_value",
        ),
    ],
)
def test_unsupported_reasoning_options_are_400s_naming_the_field(srv, body, param, code):
    r = httpx.post(
        srv.url + "/v1/responses", json={"model": MODEL, "input": "x", **body}, timeout=30
    )
    err = r.json()["error"]
    assert r.status_code == 400 and (err["param"], err["code"]) == (param, code), err
    if "include" in body:
        assert "encrypted_content" in err["message"]


def test_the_protocol_checks_pass_against_it(srv):
    from qualflow.session.conformance import Checker
    from qualflow.session.reasoning_checks import reasoning_checks, reasoning_support

    support = reasoning_support(httpx.get(srv.url + "/health").json())
    assert support.budget == 4
    checks = reasoning_checks(support)(Checker(srv.url, MODEL))
    assert len(checks) == 7
    for name, check in checks:
        check(f"protocol-{name}")  # raises CheckFailed with what it saw


def test_a_family_without_the_capability_keeps_the_400():
    from types import SimpleNamespace

    from fixtures.fake_task import FakeTask
    from qualflow.server.handler import ResponsesHandler
    from qualflow.server.protocol.errors import ApiError
    from qualflow.server.protocol.requests import parse_request

    task = FakeTask([])
    task.family = SimpleNamespace(
        name="fake", unsupported_features={"reasoning": "it never thinks"}
    )
    h = ResponsesHandler(task, "fake")
    with pytest.raises(ApiError) as e:
        h.prepare(
            parse_request({"model": "fake", "input": "x", "reasoning": {"effort": "low"}}), "r1"
        )
    assert (e.value.status, e.value.param, e.value.code) == (
        400,
        "reasoning",
        "unsupported_parameter",
    )
    assert "which the fake family does not support: it never thinks" in e.value.message
    task.family = SimpleNamespace(
        name="fake", unsupported_features={}
    )  # no reason given: the capability decides
    with pytest.raises(ApiError) as e:
        h.prepare(
            parse_request({"model": "fake", "input": "x", "reasoning": {"effort": "low"}}), "r2"
        )
    assert e.value.param == "reasoning" and "does not support" in e.value.message


def test_the_node_openai_sdk_and_the_vercel_ai_sdk_take_it(srv, tmp_path):
    """Through the Node SDKs (tests/fixtures/node/reasoning_sdks.mjs), where they are installed:
    `npm install --prefix DIR openai ai @ai-sdk/openai` and
    QUALFLOW_NODE_MODULES=DIR/node_modules (checked with openai 6.49.0, ai 6.0.326,
    @ai-sdk/openai 3.0.141). The Vercel provider renders a reasoning part from the item's
    summaries only, so its reasoning text is empty; its reasoning token count and the answer are
    ours."""
    import json
    import os
    import shutil
    import subprocess
    from pathlib import Path

    modules = os.environ.get("QUALFLOW_NODE_MODULES")
    if (
        not shutil.which("node")
        or not modules
        or not all((Path(modules) / m).is_dir() for m in ("openai", "ai", "@ai-sdk/openai"))
    ):
        pytest.skip(
            "node or its openai / ai / @ai-sdk/openai packages are not installed "
            "(QUALFLOW_NODE_MODULES)"
        )
    (tmp_path / "node_modules").symlink_to(Path(modules).resolve())
    script = shutil.copy(
        Path(__file__).parents[1] / "fixtures" / "node" / "reasoning_sdks.mjs", tmp_path
    )
    out = subprocess.run(
        ["node", script, srv.url, MODEL], capture_output=True, text=True, timeout=120, check=True
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    node, vercel = got["node"], got["vercel"]
    assert (
        node["items"] == ["reasoning", "message"]
        and node["reasoning_tokens"] == 4
        and node["reasoning"]
    )
    assert node["streamed_reasoning"] == node["reasoning"]
    assert [seq for _, _, seq in node["events"]] == list(range(len(node["events"])))
    assert {i for t, i, _ in node["events"] if t.startswith("response.reasoning_text")} == {0}
    assert {i for t, i, _ in node["events"] if t.startswith("response.output_text")} == {1}
    assert (
        vercel["parts"] == ["reasoning", "text"]
        and vercel["reasoning_tokens"] == 4
        and "stream_error" not in vercel
    )
    assert {"reasoning-start", "reasoning-end", "text-delta"} <= set(vercel["stream_parts"])
