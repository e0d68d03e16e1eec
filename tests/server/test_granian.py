"""`qualflow serve --http-server granian`: the app under granian (the optional extra
`serve-native`) in a real `qualflow serve` process on the embedded default bundle, a non-streamed
and a streamed request through the pinned openai SDK, the timing records final, and SIGTERM
stopping it as it stops uvicorn."""

from __future__ import annotations

import pytest

from fixtures.server import ServerUnderTest

pytest.importorskip("granian", reason="granian is not installed (the optional extra serve-native)")
pytestmark = pytest.mark.timeout(300)

MODEL = "qualflow-granian"


@pytest.fixture(scope="module")
def srv(bundle_dir, tmp_path_factory):
    s = ServerUnderTest(
        bundle_dir, tmp_path_factory.mktemp("granian"), "--http-server", "granian", model_name=MODEL
    ).start()
    yield s
    assert s.stop() in (0, -15), s.log()[-3000:]  # SIGTERM re-raised, as under uvicorn


def test_serves_under_granian(srv):
    assert "Starting granian" in srv.log() and "Uvicorn running" not in srv.log()


def test_non_streamed_request(srv):
    r = srv.client().responses.create(
        model=MODEL, input="Say hello.", max_output_tokens=6, store=False
    )
    assert r.status in ("completed", "incomplete") and r.usage.output_tokens > 0
    rec = srv.wait_record(r._request_id)
    assert rec["http_status"] == 200 and not rec["stream"]
    assert rec["http_received_ns"] < rec["submitted_ns"] < rec["finished_ns"] <= rec["http_sent_ns"]


def test_streamed_request(srv):
    with srv.client().responses.stream(
        model=MODEL, input="Say hello.", max_output_tokens=6, store=False
    ) as stream:
        events = list(stream)
    types = [e.type for e in events]
    assert types[0] == "response.created"
    assert types[-1] in ("response.completed", "response.incomplete")
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response
    assert deltas and final.usage.output_tokens > 0
    assert deltas == "".join(
        c.text for item in final.output if item.type == "message" for c in item.content
    )


def test_openai_shaped_error(srv):
    import openai

    with pytest.raises(openai.BadRequestError) as e:
        srv.client().responses.create(model="nope", input="hi", max_output_tokens=4)
    assert e.value.status_code == 400 and e.value.body["code"] == "model_not_found"
