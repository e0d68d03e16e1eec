"""Bundles: manifest, stable bundle hash, tamper detection at build and at load, --force,
profiles."""

from __future__ import annotations

import json
import shutil

import pytest

from qualflow.artifacts.bundle import build_bundle
from qualflow.artifacts.bundle_format import BundleError, BundleIntegrityError
from qualflow.artifacts.bundle_load import load_bundle, verify_bundle
from qualflow.artifacts.pin import PinMismatch, pin_checkpoint, write_pin
from qualflow.artifacts.profiles import UnknownProfile
from qualflow.cli import main


def test_manifest(bundle_dir, pinned):
    m = json.loads((bundle_dir / "manifest.json").read_text())
    assert m["schema_version"] == 1 and m["family"] == "qwen3" and m["profile"] == "fp16"
    assert m["precision"] == "float16" and m["context_limit"] == 3072
    assert m["generation_config"]["eos_token_id"] == [151645, 151643]
    assert m["builder"]["name"] == "qualflow" and m["builder"]["version"]
    pin = json.loads(pinned.read_text())
    assert m["checkpoint"]["id"] == pin["checkpoint"]["id"] and m["checkpoint"]["revision"] is None
    assert sorted(m["files"]) == [
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "weights.safetensors",
    ]
    assert len(m["bundle_hash"]) == 64 and len(m["chat_template_sha256"]) == 64


def test_weights_in_runtime_layout_and_precision(bundle_dir):
    import torch

    b = load_bundle(bundle_dir)
    w = b.weights()
    assert (
        w["layers.0.qkv"].shape == ((4 + 2 + 2) * 32, 128)
        and w["layers.0.qkv"].dtype == torch.float16
    )
    assert w["layers.0.gate_up"].shape == (2 * 384, 128)
    assert w["embed"].shape == (151936, 128) and "lm_head" not in w
    assert b.tokenizer.encode("Hello world").ids == [9707, 1879]
    assert "<|im_start|>" in b.chat_template and b.config["model_type"] == "qwen3"
    assert b.bundle_hash == b.manifest["bundle_hash"]


def test_building_twice_gives_same_hash(bundle_dir, pinned, tmp_path):
    m2 = build_bundle(pinned, "fp16", tmp_path / "again")
    m1 = json.loads((bundle_dir / "manifest.json").read_text())
    assert m2["bundle_hash"] == m1["bundle_hash"] and m2["files"] == m1["files"]
    assert not list(tmp_path.glob(".again.tmp-*"))


def test_nonempty_output_refused_without_force(pinned, tmp_path, capsys):
    out = tmp_path / "b"
    out.mkdir()
    (out / "stale.txt").write_text("x")
    with pytest.raises(BundleError, match="--force"):
        build_bundle(pinned, "fp16", out)
    assert main(["build", "--pin", str(pinned), "--profile", "fp16", "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (
        main(["build", "--pin", str(pinned), "--profile", "fp16", "--out", str(out), "--force"])
        == 0
    )
    assert not (out / "stale.txt").exists() and (out / "manifest.json").is_file()


def test_unknown_profile(pinned, tmp_path, capsys):
    with pytest.raises(UnknownProfile, match="known profiles: bf16, fp16, fp32"):
        build_bundle(pinned, "fp8", tmp_path / "b")
    assert (
        main(["build", "--pin", str(pinned), "--profile", "fp8", "--out", str(tmp_path / "b")]) == 2
    )
    assert "unknown profile 'fp8'" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_changed_checkpoint_file_refused_at_build(embedded_dir, tmp_path, capsys):
    ck = tmp_path / "ck"
    shutil.copytree(embedded_dir, ck)
    pin = write_pin(pin_checkpoint(str(ck)), tmp_path / "pin.json")
    cfg = ck / "generation_config.json"
    original = cfg.read_text()
    cfg.write_text(original.replace("0.6", "0.7"))
    with pytest.raises(PinMismatch, match="generation_config.json"):
        build_bundle(pin, "fp16", tmp_path / "b")
    assert main(["build", "--pin", str(pin), "--out", str(tmp_path / "b")]) == 2
    assert str(cfg) in capsys.readouterr().err
    cfg.write_text(original)
    (ck / "model.safetensors").unlink()
    with pytest.raises(PinMismatch, match="model.safetensors"):
        build_bundle(pin, "fp16", tmp_path / "b")


def test_missing_pin_file(tmp_path):
    assert main(["build", "--pin", str(tmp_path / "nope.json"), "--out", str(tmp_path / "b")]) == 2


def test_tampered_bundle_refused_at_load(bundle_dir, tmp_path):
    b = tmp_path / "b"
    shutil.copytree(bundle_dir, b)
    verify_bundle(b)
    w = b / "weights.safetensors"
    data = bytearray(w.read_bytes())
    data[-2] ^= 0x01  # one bit of one weight
    w.write_bytes(bytes(data))
    with pytest.raises(BundleIntegrityError, match="weights.safetensors"):
        load_bundle(b)
    load_bundle(b, verify=False)  # explicit opt-out still loads


def test_tampered_manifest_refused_at_load(bundle_dir, tmp_path):
    b = tmp_path / "b"
    shutil.copytree(bundle_dir, b)
    m = json.loads((b / "manifest.json").read_text())
    m["context_limit"] = 99999
    (b / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(BundleIntegrityError, match="bundle_hash"):
        load_bundle(b)
    (b / "tokenizer_config.json").unlink()
    with pytest.raises(BundleIntegrityError, match="tokenizer_config.json"):
        load_bundle(b)


def test_not_a_bundle(tmp_path):
    with pytest.raises(BundleError, match="manifest.json"):
        load_bundle(tmp_path)


def test_the_build_command_is_recorded_and_not_hashed(pinned, bundle_dir, tmp_path):
    out = tmp_path / "b"
    argv = ["build", "--pin", str(pinned), "--profile", "fp16", "--out", str(out)]
    assert main(argv) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["command"] == "qualflow " + " ".join(argv) and "command" not in m["hashed_fields"]
    assert m["bundle_hash"] == json.loads((bundle_dir / "manifest.json").read_text())["bundle_hash"]
    verify_bundle(out)
