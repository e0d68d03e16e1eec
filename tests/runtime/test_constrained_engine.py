"""Constrained decoding through the Task on the embedded default (CPU): every `required` call and
every `json_schema` output of a sampled loop validates against its schema, in process and with the
engine in its own process (the GrammarSpec crosses the boundary inside the submitted request); a
step with no constrained row touches no mask; the answer parses into calls."""

from __future__ import annotations

import json

import jsonschema
import pytest

from qualflow.runtime import (
    TOOLS,
    CallDone,
    EngineConfig,
    GenerationRequest,
    GrammarSpec,
    load_task,
)
from qualflow.runtime.engine import grammar_steps

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["city", "days"],
    "properties": {
        "city": {"enum": ["Paris", "Oslo", "Lima"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 9},
        "note": {"type": "string", "maxLength": 6},
    },
}
TOOL = {"type": "function", "name": "get_weather", "parameters": SCHEMA, "strict": True}
N = 12


def _loop(task, spec: GrammarSpec, tools) -> list[str]:
    ids = task.render_prompt(None, [{"role": "user", "content": "weather?"}], tools=tools)
    texts = []
    for i in range(N):
        params = task.default_params(max_new_tokens=120, temperature=1.0, seed=i)
        final = task.generate_sync(GenerationRequest(f"r{i}", ids, params, grammar=spec))
        assert final.finish_reason == "stop", final
        texts.append(final.text)
    return texts


@pytest.fixture(scope="module", params=["off", "on"])
def task(bundle_dir, request):
    t = load_task(
        bundle_dir, EngineConfig(max_batch=4, max_context=512, engine_process=request.param)
    )
    yield t
    t.close()


def test_required_calls_validate(task):
    assert TOOLS in task.capabilities
    for text in _loop(task, GrammarSpec("calls", (TOOL,), parallel=False), [TOOL]):
        parser = task.tool_parser()
        events = parser.push(text) + parser.finish()
        done = [e for e in events if isinstance(e, CallDone)]
        assert len(done) == 1 and done[0].name == "get_weather", text
        jsonschema.validate(json.loads(done[0].arguments), SCHEMA)


def test_json_schema_outputs_validate(task):
    for text in _loop(task, GrammarSpec("json_schema", schema=SCHEMA), None):
        jsonschema.validate(json.loads(text), SCHEMA)


def test_unconstrained_steps_touch_no_mask(bundle_dir, monkeypatch):
    touched = []
    monkeypatch.setattr(
        grammar_steps, "allocate_bitmask", lambda *a: touched.append(a) or pytest.fail("mask")
    )
    t = load_task(bundle_dir, EngineConfig(max_batch=2, max_context=256, engine_process="off"))
    try:
        ids = t.render_prompt(None, [{"role": "user", "content": "hi"}])
        final = t.generate_sync(GenerationRequest("plain", ids, t.default_params(max_new_tokens=8)))
        assert final.finish_reason in ("stop", "length") and not touched
    finally:
        t.close()
