"""The `completed` path (finish reason stop) end to end, and the strict `responses.stream()` helper.

The embedded default has random weights, so it practically never samples its EOS token. This module
therefore builds a second bundle from the same embedded checkpoint whose generation_config declares one
more stop token: a token greedy decoding of PROMPT produces a few steps in. Nothing else differs."""
from __future__ import annotations

import json
import shutil

import httpx
import pytest

from fixtures.server import ServerUnderTest

MODEL = "qualflow-stop"
PROMPT = "Hello there"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def greedy(bundle_dir):
    """Greedy token ids of PROMPT on the pristine bundle, and the step at which the extra stop token sits."""
    from qualflow.runtime import EngineConfig, GenerationRequest, load_task
    task = load_task(bundle_dir, EngineConfig(max_batch=1))
    try:
        ids = task.render_prompt(None, [{"role": "user", "content": PROMPT}])
        out = task.generate_sync(GenerationRequest("probe", ids, task.default_params(
            max_new_tokens=12, temperature=0.0, ignore_eos=True))).token_ids
    finally:
        task.close()
    k = next(i for i in range(3, len(out)) if out[i] not in out[:i])
    return out, k


@pytest.fixture(scope="module")
def srv(embedded_dir, greedy, tmp_path_factory):
    from qualflow.artifacts.bundle import build_bundle
    from qualflow.artifacts.pin import pin_checkpoint, write_pin
    tmp = tmp_path_factory.mktemp("stopbundle")
    ckpt = shutil.copytree(embedded_dir, tmp / "checkpoint")
    gc_path = ckpt / "generation_config.json"
    gc = json.loads(gc_path.read_text())
    eos = gc["eos_token_id"] if isinstance(gc["eos_token_id"], list) else [gc["eos_token_id"]]
    gc["eos_token_id"] = eos + [greedy[0][greedy[1]]]
    gc_path.write_text(json.dumps(gc))
    build_bundle(write_pin(pin_checkpoint(str(ckpt)), tmp / "pin.json"), "fp16", tmp / "bundle")
    s = ServerUnderTest(tmp / "bundle", tmp, model_name=MODEL).start()
    yield s
    s.stop()


def test_non_stream_completed(srv, greedy):
    resp = srv.client().responses.create(model=MODEL, input=PROMPT, max_output_tokens=12, temperature=0)
    assert resp.status == "completed" and resp.incomplete_details is None and resp.error is None
    assert resp.completed_at and resp.output[0].status == "completed"
    assert 0 < resp.usage.output_tokens <= greedy[1] + 1 and resp.output_text


def test_stream_helper_final_response(srv):
    with srv.client().responses.stream(model=MODEL, input=PROMPT, max_output_tokens=12, temperature=0) as s:
        events = list(s)
        final = s.get_final_response()
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert events[-1].type == "response.completed" and final.status == "completed"
    assert final.output_text == deltas and deltas
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_benchmark_extensions_override_the_stop(srv, greedy):
    """min_tokens suppresses stop tokens before N tokens; ignore_eos never stops (non-OpenAI extensions)."""
    body = {"model": MODEL, "input": PROMPT, "max_output_tokens": 12, "temperature": 0}
    r = httpx.post(srv.url + "/v1/responses", json={**body, "min_tokens": greedy[1] + 2}, timeout=60).json()
    assert r["usage"]["output_tokens"] >= greedy[1] + 2
    r = httpx.post(srv.url + "/v1/responses", json={**body, "ignore_eos": True}, timeout=60).json()
    assert r["status"] == "incomplete" and r["usage"]["output_tokens"] == 12
