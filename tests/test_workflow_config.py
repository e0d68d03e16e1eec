"""qualflow.workflow_config: the config checks the workflow runs at parse time (each error names its
key), and a model's serving settings, from which the correctness and session stages choose between
our bundle and an external endpoint."""

from __future__ import annotations

import argparse
import copy
import json

import pytest

from fixtures import REPO
from qualflow.cli import main
from qualflow.session.cli import with_model_settings
from qualflow.session.config import SessionConfig
from qualflow.workflow_config import (
    check_config,
    compare_needs_current,
    read_serving_settings,
    serving_settings,
)

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
WORKLOADS = {"tiny": {"concurrency": [1], "isl": 8, "osl": 8, "request_count": 2}}
ENDPOINT = {"url": "http://127.0.0.1:8001", "model": "served"}


def config(**model) -> dict:
    if "checkpoint" in model and "endpoint" not in model:
        model.setdefault("profiles", ["fp16"])
    return {
        "models": {"m": {"workloads": ["tiny"], **model}},
        "workloads": copy.deepcopy(WORKLOADS),
    }


def refused(cfg: dict) -> str:
    with pytest.raises(ValueError) as e:
        check_config(cfg, SCHEMA)
    assert str(e.value).startswith("config: ")
    return str(e.value)


def test_a_good_config_gets_the_schema_defaults():
    cfg = config(checkpoint="embedded", profiles=["fp16"])
    check_config(cfg, SCHEMA)
    assert cfg["models"]["m"]["revision"] is None and "software_key" in cfg


def test_a_model_names_a_checkpoint_or_an_endpoint():
    assert "models.m names neither 'checkpoint'" in refused(config())


def test_a_schema_error_is_one_line_naming_the_key():
    msg = refused({**config(checkpoint="embedded"), "bogus_key": 1})
    assert (
        msg
        == "config: (top level): Additional properties are not allowed ('bogus_key' was unexpected)"
    )


def test_an_unknown_workload_is_named():
    assert "models.m.workloads names 'nope'" in refused(
        {
            **config(checkpoint="embedded"),
            "models": {
                "m": {"checkpoint": "embedded", "profiles": ["fp16"], "workloads": ["nope"]}
            },
        }
    )


def test_an_endpoint_has_no_build_profile_and_gets_the_endpoint_one():
    assert "models.m.profiles: an endpoint has no build profile" in refused(
        config(endpoint=ENDPOINT, profiles=["fp16"])
    )
    cfg = config(endpoint=ENDPOINT)
    check_config(cfg, SCHEMA)
    assert cfg["models"]["m"]["profiles"] == ["endpoint"]


def test_an_endpoint_has_no_harness_ceiling():
    cfg = config(endpoint=ENDPOINT)
    cfg["workloads"]["tiny"]["harness_ceiling"] = True
    assert "models.m is an endpoint, and workloads ['tiny'] have harness_ceiling" in refused(cfg)


def test_an_endpoint_has_no_cache_off_rerun():
    cfg = config(endpoint=ENDPOINT)
    cfg["workloads"]["tiny"]["cache_off_rerun"] = True
    assert "workloads ['tiny'] have cache_off_rerun: the rerun is our server" in refused(cfg)


def test_chaining_needs_every_model_running_it_to_serve_with_state():
    cfg = config(checkpoint="embedded")
    cfg["workloads"]["tiny"].update(conversation_num=2, chaining="previous_response_id")
    assert "config: models.m.state: workloads ['tiny'] chain their turns" in refused(cfg)
    cfg["models"]["m"]["state"] = True
    check_config(cfg, SCHEMA)
    cfg["models"]["n"] = {**cfg["models"]["m"], "state": False}
    assert "config: models.n.state" in refused(cfg)


def test_chaining_with_a_harness_ceiling_is_a_config_error():
    cfg = config(checkpoint="embedded", state=True)
    cfg["workloads"]["tiny"].update(
        conversation_num=2, chaining="previous_response_id", harness_ceiling=True
    )
    assert "config: workloads.tiny.harness_ceiling: the ceiling's server" in refused(cfg)


def test_a_missing_local_checkpoint_is_named():
    msg = refused(config(checkpoint="/nonexistent/ckpt-dir"))
    assert "models.m.checkpoint: no such directory '/nonexistent/ckpt-dir'" in msg


def test_a_hub_checkpoint_needs_a_revision_unless_unpinned_is_allowed():
    assert "models.m.revision must be a full commit sha" in refused(config(checkpoint="Org/Model"))
    check_config(config(checkpoint="Org/Model", allow_unpinned=True), SCHEMA)


def test_workload_invariants_and_prompt_files_are_checked():
    cfg = config(checkpoint="embedded")
    cfg["workloads"]["tiny"]["slo_by_load"] = {"c9": {"max_error_rate": 0}}
    assert "config: workloads.tiny.slo_by_load.c9 names no load of the workload" in refused(cfg)
    cfg = config(checkpoint="embedded")
    del cfg["workloads"]["tiny"]["isl"]
    cfg["workloads"]["tiny"]["input_file"] = "/nonexistent/prompts.jsonl"
    assert "workloads.tiny.input_file: no such file" in refused(cfg)


def test_compare_needs_base_and_head():
    with pytest.raises(ValueError, match="config: compare.base and compare.head must be set"):
        compare_needs_current({"base": "v1"})
    assert compare_needs_current({"base": "v1", "head": "current"})
    assert not compare_needs_current({"base": "v1", "head": "v2"})


def test_serving_settings_round_trip_through_the_cli(tmp_path):
    out = tmp_path / "serving.json"
    settings = serving_settings({"endpoint": ENDPOINT, "request_extensions": None})
    assert settings == {"endpoint": ENDPOINT, "request_extensions": False}
    assert serving_settings({"checkpoint": "embedded"})["request_extensions"] is True
    assert main(["model-settings", "--settings", json.dumps(settings), "--out", str(out)]) == 0
    assert read_serving_settings(out) == settings
    assert main(["model-settings", "--settings", '{"bundle": 1}', "--out", str(out)]) == 2


def test_the_session_takes_endpoint_and_extensions_from_the_settings(tmp_path):
    f = tmp_path / "serving.json"
    f.write_text(json.dumps({"endpoint": ENDPOINT, "request_extensions": False}))
    cfg = with_model_settings(SessionConfig(out="o", points="p", model_settings=str(f)))
    assert json.loads(cfg.endpoint) == ENDPOINT and cfg.request_extensions is False
    f.write_text(json.dumps({"endpoint": None, "request_extensions": True}))
    cfg = with_model_settings(SessionConfig(out="o", points="p", bundle="b", model_settings=str(f)))
    assert cfg.endpoint is None and cfg.bundle == "b" and cfg.request_extensions is True


def test_correctness_runs_endpoint_correctness_where_the_settings_name_an_endpoint(
    tmp_path, monkeypatch
):
    import qualflow.session.endpoint as endpoint

    seen = []
    monkeypatch.setattr(endpoint, "main_endpoint_correctness", lambda a: seen.append(a) or 0)
    f = tmp_path / "serving.json"
    f.write_text(json.dumps({"endpoint": ENDPOINT, "request_extensions": False}))
    assert (
        main(["correctness", "--model-settings", str(f), "--pin", "p.json", "--out", "c.parquet"])
        == 0
    )
    (a,) = seen
    assert (
        isinstance(a, argparse.Namespace)
        and json.loads(a.endpoint) == ENDPOINT
        and a.pin == "p.json"
    )
    f.write_text(json.dumps({"endpoint": None, "request_extensions": True}))
    assert (
        main(["correctness", "--model-settings", str(f), "--out", "c.parquet"]) == 2
    )  # no --bundle
    assert len(seen) == 1
