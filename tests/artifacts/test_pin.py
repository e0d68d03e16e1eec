"""Pinning: local dirs, hub ids with the hub client faked at its boundary, clear errors."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import huggingface_hub
import pytest

from qualflow.artifacts.pin import (
    CheckpointError,
    CheckpointNotFound,
    UnpinnedRevision,
    pin_checkpoint,
    read_pin,
    sha256_file,
)
from qualflow.cli import main

SHA = "0123456789abcdef0123456789abcdef01234567"
RESOLVED = "fedcba9876543210fedcba9876543210fedcba98"


def test_local_pin(embedded_dir, pinned):
    pin = read_pin(pinned)
    assert pin["schema_version"] == 1 and pin["family"] == "qwen3"
    assert pin["path"] == str(embedded_dir) and pin["checkpoint"]["source"] == "local"
    assert pin["checkpoint"]["revision"] is None
    assert (
        list(pin["files"])
        == sorted(pin["files"])
        == [
            "config.json",
            "generation_config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json",
        ]
    )
    f = pin["files"]["model.safetensors"]
    assert f["sha256"] == sha256_file(embedded_dir / "model.safetensors")
    assert f["size"] == (embedded_dir / "model.safetensors").stat().st_size
    assert pin["tokenizer"]["files"]["tokenizer.json"] == pin["files"]["tokenizer.json"]["sha256"]
    assert len(pin["tokenizer"]["sha256"]) == 64
    assert pin["generation_config"]["content"]["eos_token_id"] == [151645, 151643]


def test_relative_path_recorded_absolute(embedded_dir, monkeypatch):
    monkeypatch.chdir(embedded_dir.parent)
    pin = pin_checkpoint(f"./{embedded_dir.name}")
    assert pin["path"] == str(embedded_dir)


@pytest.fixture
def fake_hub(monkeypatch, embedded_dir):
    calls = {"download": [], "resolve": []}

    def snapshot_download(repo_id, revision=None, **kw):
        calls["download"].append((repo_id, revision))
        return str(embedded_dir)

    class FakeApi:
        def model_info(self, repo_id, revision=None, **kw):
            calls["resolve"].append((repo_id, revision))
            return SimpleNamespace(sha=RESOLVED)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    return calls


def test_hub_full_sha_accepted(fake_hub):
    pin = pin_checkpoint("Qwen/Qwen3-0.6B", SHA)
    assert fake_hub == {"download": [("Qwen/Qwen3-0.6B", SHA)], "resolve": []}
    assert pin["checkpoint"]["id"] == "Qwen/Qwen3-0.6B" and pin["checkpoint"]["source"] == "hub"
    assert pin["checkpoint"]["revision"] == SHA and pin["family"] == "qwen3"


@pytest.mark.parametrize("rev", [None, "main", "v1.0", SHA[:12], SHA.upper()])
def test_hub_branch_tag_or_short_sha_refused(fake_hub, rev):
    with pytest.raises(UnpinnedRevision, match="40-hex commit sha"):
        pin_checkpoint("Qwen/Qwen3-0.6B", rev)
    assert fake_hub == {"download": [], "resolve": []}


def test_hub_allow_unpinned_resolves_and_records(fake_hub):
    pin = pin_checkpoint("Qwen/Qwen3-0.6B", "main", allow_unpinned=True)
    assert fake_hub["resolve"] == [("Qwen/Qwen3-0.6B", "main")]
    assert fake_hub["download"] == [("Qwen/Qwen3-0.6B", RESOLVED)]
    assert (
        pin["checkpoint"]["revision"] == RESOLVED
        and pin["checkpoint"]["requested_revision"] == "main"
    )


def test_cli_hub_branch_exits_2(fake_hub, tmp_path, capsys):
    out = tmp_path / "pin.json"
    assert (
        main(["pin", "--checkpoint", "Qwen/Qwen3-0.6B", "--revision", "main", "--out", str(out)])
        == 2
    )
    assert "qualflow pin: error:" in capsys.readouterr().err and not out.exists()
    assert (
        main(
            [
                "pin",
                "--checkpoint",
                "Qwen/Qwen3-0.6B",
                "--revision",
                "main",
                "--allow-unpinned",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert json.loads(out.read_text())["checkpoint"]["revision"] == RESOLVED


def test_missing_dir(tmp_path, capsys):
    with pytest.raises(CheckpointNotFound, match="not found"):
        pin_checkpoint(str(tmp_path / "nope"))
    assert (
        main(["pin", "--checkpoint", str(tmp_path / "nope"), "--out", str(tmp_path / "p.json")])
        == 2
    )
    assert str(tmp_path / "nope") in capsys.readouterr().err


def _small_copy(embedded_dir, dst):
    dst.mkdir()
    for n in ("config.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(embedded_dir / n, dst / n)
    (dst / "tokenizer.json").write_text("{}")
    return dst


def test_missing_config(embedded_dir, tmp_path):
    d = _small_copy(embedded_dir, tmp_path / "ck")
    (d / "config.json").unlink()
    with pytest.raises(CheckpointError, match="no config.json") as e:
        pin_checkpoint(str(d))
    assert str(d) in str(e.value)


def test_unknown_family(embedded_dir, tmp_path, capsys):
    d = _small_copy(embedded_dir, tmp_path / "ck")
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "model_type": "llama"}))
    with pytest.raises(CheckpointError, match="'llama' is not a known family"):
        pin_checkpoint(str(d))
    assert main(["pin", "--checkpoint", str(d), "--out", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert "llama" in err and str(d / "config.json") in err and "Traceback" not in err


def test_bad_config_json(embedded_dir, tmp_path):
    d = _small_copy(embedded_dir, tmp_path / "ck")
    (d / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        pin_checkpoint(str(d))


def test_revision_for_local_dir_refused(embedded_dir):
    with pytest.raises(CheckpointError, match="only apply to hub"):
        pin_checkpoint(str(embedded_dir), SHA)


def test_hub_client_errors_become_clear_errors(monkeypatch):
    def offline(repo_id, revision=None, **kw):
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(
        CheckpointError, match=f"could not download hub checkpoint Qwen/Qwen3-0.6B@{SHA}"
    ):
        pin_checkpoint("Qwen/Qwen3-0.6B", SHA)


def test_the_pin_command_is_recorded(embedded_dir, tmp_path):
    argv = ["pin", "--checkpoint", str(embedded_dir), "--out", str(tmp_path / "pin.json")]
    assert main(argv) == 0
    pin = read_pin(tmp_path / "pin.json")
    assert pin["command"] == "qualflow " + " ".join(argv)
    assert {k: v for k, v in pin.items() if k != "command"} == pin_checkpoint(str(embedded_dir))
