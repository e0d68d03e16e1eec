"""Constrained decoding through the Task on the embedded default (CPU): every `required` call and
every `json_schema` output of a sampled loop validates against its schema, in process and with the
engine in its own process (the GrammarSpec crosses the boundary inside the submitted request); a
step with no constrained row touches no mask; the answer parses into calls; a new grammar is
compiled off the submitting thread and the engine's steps."""

from __future__ import annotations

import asyncio
import json
import threading

import jsonschema
import pytest

from qualflow.runtime import (
    TOOLS,
    CallDone,
    EngineConfig,
    GenerationRequest,
    GrammarSpec,
    TaskTiming,
    load_task,
)
from qualflow.runtime.engine import grammar_steps
from qualflow.runtime.engine.grammar import GrammarCompiler
from qualflow.runtime.engine.sequence import Sequence

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


def test_a_compile_blocks_neither_the_event_loop_nor_other_requests(bundle_dir, monkeypatch):
    """A request whose grammar is new is compiled on the compiler's thread (here the compile is
    held until released): meanwhile the event loop that submitted it runs (a heartbeat ticks) and a
    plain request submitted after it completes; released, the constrained request completes with
    output valid against its schema. A second request with the same schema is served from the
    cache, on the submitting thread, with no compile."""
    started, release, compiles, seen = threading.Event(), threading.Event(), [], set()
    real = GrammarCompiler.lark

    def held(self, lark):
        if lark not in seen:  # a new grammar: its compile
            seen.add(lark)
            started.set()
            # released by the event loop, once its heartbeat ticked during this compile: on the
            # loop's own thread (the fault tested for) this times out instead
            compiles.append((threading.current_thread().name, release.wait(20)))
        return real(self, lark)

    monkeypatch.setattr(GrammarCompiler, "lark", held)
    t = load_task(bundle_dir, EngineConfig(max_batch=4, max_context=512, engine_process="off"))
    ids = t.render_prompt(None, [{"role": "user", "content": "weather?"}])
    spec = GrammarSpec("json_schema", schema=SCHEMA)

    def constrained(rid: str) -> GenerationRequest:
        params = t.default_params(max_new_tokens=120, temperature=1.0, seed=3)
        return GenerationRequest(rid, ids, params, grammar=spec)

    async def last(stream):
        return [ev async for ev in stream][-1]

    async def main():
        ticks = 0

        async def heartbeat():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        beat = asyncio.create_task(heartbeat())
        first = t.open(constrained("c1"))
        await asyncio.to_thread(started.wait, 60)
        at_start = ticks
        plain = t.open(GenerationRequest("p", ids, t.default_params(max_new_tokens=8)))
        plain_final = await last(plain)
        assert not release.is_set() and plain_final.finish_reason in ("stop", "length")
        while ticks < at_start + 3:  # the heartbeat ticks while the compile is held
            await asyncio.sleep(0.001)
        release.set()
        final = await last(first)
        again = await last(t.open(constrained("c2")))
        beat.cancel()
        return final, again

    try:
        final, again = asyncio.run(main())
    finally:
        release.set()
        t.close()
    # one compile, on the compiler's thread, released by the running loop
    assert compiles == [("qualflow-grammar", True)]
    for f in (final, again):
        assert f.finish_reason == "stop", f
        jsonschema.validate(json.loads(f.text), SCHEMA)


def test_a_request_cancelled_while_its_grammar_compiles_never_runs(bundle_dir, monkeypatch):
    """Closing a constrained request's stream while its grammar compiles cancels it there: once
    the compile ends the engine does not take it (no token, nothing left compiling or live)."""
    started, release = threading.Event(), threading.Event()
    real = GrammarCompiler.lark

    def held(self, lark):
        started.set()
        release.wait(20)
        return real(self, lark)

    monkeypatch.setattr(GrammarCompiler, "lark", held)
    t = load_task(bundle_dir, EngineConfig(max_batch=2, max_context=512, engine_process="off"))
    ids = t.render_prompt(None, [{"role": "user", "content": "weather?"}])
    params = t.default_params(max_new_tokens=40)
    spec = GrammarSpec("json_schema", schema=SCHEMA)

    async def main():
        stream = t.open(GenerationRequest("c", ids, params, grammar=spec))
        await asyncio.to_thread(started.wait, 60)
        await stream.aclose()  # cancels
        plain = t.open(GenerationRequest("p", ids, t.default_params(max_new_tokens=4)))
        assert [ev async for ev in plain][-1].finish_reason in ("stop", "length")
        release.set()  # the compile ends after the cancel was applied
        while t.engine.grammar.busy():
            await asyncio.sleep(0.01)
        again = t.open(GenerationRequest("p2", ids, t.default_params(max_new_tokens=4)))
        assert [ev async for ev in again][-1].finish_reason in ("stop", "length")
        return stream.seq

    try:
        seq = asyncio.run(main())
    finally:
        release.set()
        t.close()
    assert seq.done and seq.out == [] and not t.engine.grammar.live
    assert t.engine.grammar.compiling("c") == []


def test_the_compiler_is_built_for_the_first_constrained_request_not_at_load(bundle_dir):
    """Building llguidance's tokenizer costs seconds of CPU: an engine pays it for its first
    constrained request, not at load, so one that never sees a tool or a schema never does; once
    closing it begins no build (a constrained request then ends with an error saying why)."""
    t = load_task(bundle_dir, EngineConfig(max_batch=2, max_context=512, engine_process="off"))
    ids = t.render_prompt(None, [{"role": "user", "content": "weather?"}])
    spec = GrammarSpec("json_schema", schema=SCHEMA)
    try:
        plain = t.generate_sync(GenerationRequest("p", ids, t.default_params(max_new_tokens=4)))
        assert plain.finish_reason in ("stop", "length")
        closing = grammar_steps.GrammarSteps(t.engine.grammar.setup)
        closing.close()  # nothing was begun: returns at once (it waited for the build)
        assert not closing.built and not t.engine.grammar.built
        params = t.default_params(max_new_tokens=120, temperature=1.0, seed=3)
        final = t.generate_sync(GenerationRequest("c", ids, params, grammar=spec))
        assert t.engine.grammar.built and final.finish_reason == "stop", final
        jsonschema.validate(json.loads(final.text), SCHEMA)
    finally:
        t.close()
    admitted, answered = [], threading.Event()
    seq = Sequence(GenerationRequest("late", ids, params, grammar=spec), print, TaskTiming(0))
    closing.attach(seq, lambda item: (admitted.append(item), answered.set()))
    assert answered.wait(60)  # from the compiler's thread, which begins no build
    assert isinstance(admitted[0], grammar_steps.Refused), admitted
    assert "the engine is closing" in admitted[0].why
