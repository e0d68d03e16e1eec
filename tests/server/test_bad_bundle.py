"""`qualflow serve` on bad input (a tampered or missing bundle) names it and exits 2, as every stage
does for bad input."""

from __future__ import annotations

import shutil
import subprocess
import sys


def serve(bundle) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "qualflow.cli", "serve", "--bundle", str(bundle), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_tampered_bundle_exits_2_naming_the_file(bundle_dir, tmp_path):
    b = tmp_path / "b"
    shutil.copytree(bundle_dir, b)
    w = b / "weights.safetensors"
    data = bytearray(w.read_bytes())
    data[-2] ^= 0x01  # one bit of one weight
    w.write_bytes(bytes(data))
    p = serve(b)
    assert p.returncode == 2, p.stderr[-2000:]
    assert "bundle file was modified" in p.stderr and "weights.safetensors" in p.stderr


def test_a_missing_bundle_exits_2(tmp_path):
    p = serve(tmp_path / "nope")
    assert p.returncode == 2 and "not a bundle" in p.stderr, p.stderr[-2000:]
