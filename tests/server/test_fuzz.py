"""Property: no malformed body gives a 5xx. A seeded fuzz (hypothesis, 1,200 bodies) of the real
app with the real Task (embedded default), in process: mutations of a valid body (wrong types,
unknown keys, lone surrogates escaped and raw, deep nesting, huge strings, odd content types).
Every answer is < 500 with an OpenAI-shaped error body, every timing record is final, and the
server still answers."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

pytestmark = pytest.mark.timeout(300)

MODEL = "m"
BASE = {"model": MODEL, "input": "Hello", "max_output_tokens": 3}
KEYS = [
    "model",
    "input",
    "instructions",
    "max_output_tokens",
    "temperature",
    "top_p",
    "stream",
    "user",
    "metadata",
    "text",
    "tools",
    "tool_choice",
    "reasoning",
    "include",
    "store",
    "stream_options",
    "ignore_eos",
    "min_tokens",
    "truncation",
    "service_tier",
    "safety_identifier",
    "prompt_cache_key",
    "previous_response_id",
    "background",
    "top_logprobs",
    "bogus",
]
NASTY = [
    "\ud800",
    "\udfff",
    "a\ud83d",
    "\x00",
    "\u202e",
    "💥",
    "",
    " ",
    "\\",
    '"',
    "\n" * 3,
    "x" * 70_000,
]
strings = st.one_of(st.sampled_from(NASTY), st.text(max_size=20))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), strings
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(strings, inner, max_size=4)
    ),
    max_leaves=12,
)
items = st.fixed_dictionaries(
    {},
    optional={
        "type": st.one_of(st.just("message"), values),
        "role": st.one_of(st.sampled_from(["user", "system", "assistant"]), values),
        "content": st.one_of(
            strings,
            st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "type": st.one_of(st.just("input_text"), values),
                        "text": st.one_of(strings, values),
                    },
                ),
                max_size=3,
            ),
            values,
        ),
        "id": values,
        "status": values,
    },
)


@st.composite
def bodies(draw) -> tuple[bytes, str]:
    body = dict(BASE)
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.one_of(st.sampled_from(KEYS), strings))
        body[key] = draw(
            st.one_of(values, st.lists(items, max_size=3)) if key == "input" else values
        )
    if draw(st.booleans()):
        body.pop(draw(st.sampled_from(list(body))), None)
    raw = json.dumps(body).encode()
    how = draw(st.sampled_from(["json"] * 6 + ["raw-surrogate", "deep", "truncate", "bytes"]))
    if how == "raw-surrogate":
        raw = raw.replace(b"Hello", b"He\xed\xa0\x80llo")
    elif how == "deep":
        n = draw(st.sampled_from([999, 1000, 1025, 5000]))
        raw = raw.replace(b'"Hello"', b"[" * n + b"]" * n)
    elif how == "truncate":
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif how == "bytes":
        raw = draw(st.binary(max_size=64))
    ctype = draw(
        st.sampled_from(
            ["application/json"] * 8 + ["text/plain", "application/x-www-form-urlencoded"]
        )
    )
    return raw, ctype


@pytest.fixture(scope="module")
def client(bundle_dir):
    from qualflow.runtime import EngineConfig, load_task
    from qualflow.server.app import create_app

    with TestClient(
        create_app(
            task=load_task(bundle_dir, EngineConfig(max_batch=4, max_context=64)), model_name=MODEL
        ),
        raise_server_exceptions=False,
    ) as c:
        yield c


@settings(
    max_examples=1200,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
@given(bodies())
def test_malformed_bodies_never_5xx(client, body):
    raw, ctype = body
    r = client.post("/v1/responses", content=raw, headers={"content-type": ctype})
    assert r.status_code < 500, (r.status_code, r.text[:500], raw[:300])
    if r.status_code >= 400:
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["message"]
    elif r.headers["content-type"].startswith("text/event-stream"):
        assert r.text.rstrip().rsplit("\n", 1)[-1].startswith('data: {"type":"response.')


def test_after_the_fuzz_every_record_is_final_and_the_server_answers(client):
    """Runs after the fuzz (file order): nothing left in progress, the timing endpoint still
    serializes."""
    recs, after = [], -1
    while True:
        page = client.get("/v1/qualflow/task-timings", params={"after": after, "limit": 500}).json()
        recs += page["data"]
        after = page["next_after"]
        if not page["has_more"]:
            break
    assert len(recs) >= 1000
    assert all(r["status"] != "in_progress" and r["http_sent_ns"] is not None for r in recs)
    assert client.get("/health").json()["status"] == "ok"
    r = client.post("/v1/responses", json=BASE)
    assert r.status_code == 200 and r.json()["usage"]["output_tokens"] >= 1
