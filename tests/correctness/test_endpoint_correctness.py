"""Endpoint correctness through the API: our own server used as an external endpoint reproduces the
family reference on the pinned checkpoint; against a checkpoint with other weights (another seed) it
fails, naming the first divergence per prompt. The endpoint is reached as `qualflow
endpoint-correctness` reaches it: a launched process, checked on /v1/models, stopped afterwards."""

from __future__ import annotations

import json
import sys

import pytest

from qualflow.correctness.endpoint import first_divergence
from qualflow.session.endpoint import EndpointError, EndpointProcess, EndpointSpec
from qualflow.session.server_process import port_is_free


def test_first_divergence_names_the_token():
    pieces = [" a", " a b", " a b c"]
    assert first_divergence(pieces, " a b c d", strip_leading=False).matched == 3
    d = first_divergence(pieces, " a bX", strip_leading=False)
    assert (d.matched, d.reference_piece, d.endpoint_text) == (2, " c", "X")
    # text a stack echoes before the first token (blank lines after the think block)
    assert first_divergence(pieces, "\n\n a b c", strip_leading=True).matched == 3
    assert first_divergence(pieces, "\n\n a b c", strip_leading=False).matched == 0


@pytest.fixture(scope="module")
def own_server_as_endpoint(bundle_dir, tmp_path_factory):
    """Our server, launched and owned as an endpoint would be (EndpointProcess with `launch`)."""
    d = tmp_path_factory.mktemp("ep")
    spec = EndpointSpec(
        url="http://127.0.0.1:{port}",
        model="own",
        launch=(
            sys.executable,
            "-m",
            "qualflow.cli",
            "serve",
            "--bundle",
            str(bundle_dir),
            "--device",
            "cpu",
            "--port",
            "{port}",
            "--model-name",
            "own",
            "--cpu-threads",
            "1",
        ),
    )
    srv = EndpointProcess(spec, log_path=d / "endpoint.log")
    srv.start()
    try:
        health = srv.wait_healthy(180)
        assert health["serves_model"] and "own" in health["models"]
        yield srv
    finally:
        srv.stop()
        assert port_is_free("127.0.0.1", srv.port)


def test_own_server_as_endpoint_matches_the_reference(own_server_as_endpoint, embedded_dir):
    from qualflow.correctness.endpoint import run_endpoint_correctness

    srv = own_server_as_endpoint
    df = run_endpoint_correctness(srv.url, srv.model, str(embedded_dir))
    assert len(df) == 6 and df["passed"].all(), df[["case_id", "detail"]].to_string()
    assert set(df["thresholds_version"]) == {"qwen3-endpoint-correctness-v1"}
    assert (df["measured"] == df["threshold"]).all()


def test_other_weights_fail_with_a_named_divergence(own_server_as_endpoint, tmp_path):
    from qualflow.correctness.endpoint import run_endpoint_correctness
    from qualflow.families.qwen3.synthetic import write_embedded

    other = write_embedded(tmp_path / "other-seed", "tiny", seed=7)
    assert json.loads((other / "config.json").read_text())["qualflow_embedded"]["seed"] == 7
    srv = own_server_as_endpoint
    df = run_endpoint_correctness(srv.url, srv.model, str(other))
    assert not df["passed"].any(), df[["case_id", "detail"]].to_string()
    # the texts are Python reprs: quoted '...', or "..." when the text holds a single quote
    assert df["detail"].str.contains(r"first divergence at token \d+ of 16: reference ['\"]").all()
    assert (df["measured"] < df["threshold"]).all()


def test_an_endpoint_not_serving_the_model_is_named(own_server_as_endpoint, tmp_path):
    srv = EndpointProcess(
        EndpointSpec(url=own_server_as_endpoint.url, model="someone-else"),
        log_path=tmp_path / "x.log",
    )
    srv.start()
    with pytest.raises(
        EndpointError, match=r"does not name 'someone-else' \(it serves \['own'\]\)"
    ):
        srv.wait_healthy(30)
    assert srv.stop() is None  # nothing launched, nothing to stop
