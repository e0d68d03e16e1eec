"""docs/configuration.md documents every key of workflow/schemas/config.schema.yaml: its key
table is the one scripts/config_docs.py generates from the schema, and its full example is a
valid config."""

from __future__ import annotations

import re
import subprocess
import sys

import jsonschema
import yaml

from fixtures import REPO

PAGE = REPO / "docs" / "configuration.md"
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
SCRIPT = REPO / "scripts" / "config_docs.py"


def _check(page):
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--check", str(page)], capture_output=True, text=True
    )


def test_every_schema_key_is_on_the_page():
    r = _check(PAGE)
    assert r.returncode == 0, r.stderr


def test_a_key_missing_from_the_page_fails_the_check(tmp_path):
    page = tmp_path / "configuration.md"
    page.write_text(PAGE.read_text().replace("`server.max_batch`", "`server.gone`"))
    r = _check(page)
    assert r.returncode == 1 and "server.max_batch" in r.stderr, r.stderr


def test_a_key_added_to_the_schema_fails_the_check(tmp_path):
    schema = yaml.safe_load(SCHEMA.read_text())
    schema["properties"]["server"]["properties"]["new_knob"] = {"type": "integer", "default": 1}
    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump(schema))
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--schema", str(path), "--check", str(PAGE)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "server.new_knob" in r.stderr, r.stderr


def test_the_full_example_is_a_valid_config():
    example = re.search(r"## An example with every key.*?```yaml\n(.*?)```", PAGE.read_text(), re.S)
    assert example, "docs/configuration.md has no full example"
    jsonschema.validate(yaml.safe_load(example.group(1)), yaml.safe_load(SCHEMA.read_text()))
