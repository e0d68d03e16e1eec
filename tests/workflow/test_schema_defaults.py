"""The workflow schema's defaults are the config dataclasses' defaults: each schema setting that a
stage takes maps to one field, and the two defaults are equal (one default per setting)."""

from __future__ import annotations

import importlib
import sys
from dataclasses import MISSING, fields

import pytest
import yaml

from fixtures import REPO

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"

ENGINE = ("qualflow.runtime.config", "EngineConfig")
SESSION = ("qualflow.session.config", "SessionConfig")

# schema path -> (config class, field)
FIELD_OF = {
    ("device",): (ENGINE, "device"),
    ("server", "max_batch"): (ENGINE, "max_batch"),
    ("server", "max_context"): (ENGINE, "max_context"),
    ("server", "cpu_threads"): (ENGINE, "cpu_threads"),
    ("server", "host"): (SESSION, "host"),
    ("server", "port"): (SESSION, "port"),
    ("server", "startup_timeout_s"): (SESSION, "startup_timeout"),
    ("server", "ceiling_step_ms"): (SESSION, "ceiling_step_ms"),
    ("server", "api_server_count"): (SESSION, "api_server_count"),
    ("server", "ceiling_api_server_count"): (SESSION, "ceiling_api_server_count"),
    ("warmup", "requests"): (SESSION, "warmup_requests"),
    ("warmup", "max_output_tokens"): (SESSION, "warmup_max_tokens"),
    ("aiperf", "workers_max"): (SESSION, "aiperf_workers"),
    ("aiperf", "record_processors"): (SESSION, "aiperf_record_processors"),
    ("aiperf", "timeout_s"): (SESSION, "aiperf_timeout"),
    ("protocol_checks",): (SESSION, "protocol"),
    ("allow_unpinned_client",): (SESSION, "allow_unpinned_client"),
}
# the sections whose every setting is a stage's config field
SECTIONS = ("server", "warmup", "aiperf")


def _schema() -> dict:
    return yaml.safe_load(SCHEMA.read_text())["properties"]


def schema_default(path: tuple[str, ...]):
    node = {"properties": _schema()}
    for key in path:
        node = node["properties"][key]
    assert "default" in node, f"schema {'.'.join(path)} has no default"
    return node["default"]


def field_default(cls_ref: tuple[str, str], name: str):
    module, cls_name = cls_ref
    try:
        cls = getattr(importlib.import_module(module), cls_name)
    except (ImportError, AttributeError):
        pytest.skip(f"{module}.{cls_name} is not in this tree yet")
    f = {f.name: f for f in fields(cls)}.get(name)
    assert f is not None, f"{cls_name} has no field {name!r}"
    assert f.default is not MISSING, f"{cls_name}.{name} has no default"
    return f.default


@pytest.mark.parametrize("path", sorted(FIELD_OF), ids=".".join)
def test_schema_default_is_the_field_default(path):
    cls_ref, name = FIELD_OF[path]
    assert schema_default(path) == field_default(cls_ref, name), (
        f"schema {'.'.join(path)} and {cls_ref[1]}.{name} disagree on the default"
    )


def test_every_stage_setting_of_the_schema_is_mapped():
    props = _schema()
    keys = {(s, k) for s in SECTIONS for k in props[s]["properties"]}
    assert keys <= set(FIELD_OF), (
        f"schema settings with no config field: {sorted(keys - set(FIELD_OF))}"
    )
    for path in FIELD_OF:
        schema_default(path)  # every mapped key is in the schema, with a default


def test_the_mapping_notices_a_changed_default(monkeypatch):
    """Not vacuous: a schema default that differs from its field fails the check."""
    real = _schema()
    real["server"]["properties"]["max_batch"]["default"] = 0
    monkeypatch.setattr(sys.modules[__name__], "_schema", lambda: real)
    with pytest.raises(AssertionError, match="disagree"):
        test_schema_default_is_the_field_default(("server", "max_batch"))


def test_workload_vocabularies_are_the_commands():
    """The schema's workload enums are the AIPerf command's vocabularies
    (qualflow.aiperf.command), and its defaults are the point's (AiperfPoint)."""
    from qualflow.aiperf.command import ARRIVAL_PATTERNS, PROMPT_CORPORA, AiperfPoint

    props = _schema()["workloads"]["additionalProperties"]["properties"]
    assert set(props["arrival_pattern"]["enum"]) == set(ARRIVAL_PATTERNS)
    assert set(props["prompt_corpus"]["enum"]) - {None} == set(PROMPT_CORPORA)
    defaults = {f.name: f.default for f in fields(AiperfPoint)}
    for key in ("arrival_pattern", "prompt_corpus", "input_file"):
        assert props[key]["default"] == defaults[key], key


def test_a_models_state_default_is_the_sessions():
    """`models.<model>.state` reaches the session as --state: one default, the session's."""
    node = _schema()["models"]["additionalProperties"]["properties"]["state"]
    assert node["default"] == field_default(SESSION, "state") is False
