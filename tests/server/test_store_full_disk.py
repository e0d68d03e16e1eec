"""A response the store cannot write (its disk full) is not acknowledged: the client gets OpenAI's
500, and the timing record carries the error and no store write time, so nothing counts it as
stored (the chaos run's check of acknowledged responses read the write time alone, and a disk-full
cycle reported two such responses lost). The store on a real tmpfs, filled; skipped where no tmpfs
can be mounted (not root)."""

from __future__ import annotations

import subprocess

import openai
import pytest

from fixtures.stateful import client, model_of, stateful_server

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def disk(tmp_path):
    d = tmp_path / "disk"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(d)], text=True,
                       capture_output=True)  # fmt: skip
    if r.returncode:
        pytest.skip(f"no tmpfs here: {r.stderr.strip() or r.returncode}")
    yield d
    subprocess.run(["umount", "-l", str(d)], capture_output=True)


def test_a_response_the_full_store_cannot_write_is_a_500_and_not_recorded_as_stored(
    bundle_dir, tmp_path, disk
):
    srv = stateful_server(bundle_dir, tmp_path / "srv", str(disk / "store.db")).start()
    try:
        c, model = client(srv), model_of(srv)
        ok = c.responses.create(model=model, input="before", max_output_tokens=2)
        with open(disk / "filler", "wb") as fh:  # the disk full, to the last byte
            try:
                while True:
                    fh.write(b"\0" * 65536)
                    fh.flush()
            except OSError:
                pass
        with pytest.raises(openai.InternalServerError) as e:
            for i in range(20):  # until a write needs a page the disk no longer has
                c.responses.create(model=model, input=f"after {i} " * 40, max_output_tokens=2)
        assert "could not be stored" in e.value.message
        recs = {r["response_id"]: r for r in srv.records()}
        assert recs[ok.id]["store_write_ns"] > 0
        failed = [r for r in recs.values() if r.get("error") and "stored" in r["error"]]
        assert failed and all(r["store_write_ns"] is None for r in failed), failed
    finally:
        srv.stop()
