"""A response the store cannot write (its disk full) is not acknowledged: the client gets OpenAI's
500, and the timing record carries the error and no store write time, so nothing counts it as
stored (the chaos run's check of acknowledged responses read the write time alone, and a disk-full
cycle reported two such responses lost). The store on a real tmpfs, filled; skipped where no tmpfs
can be mounted (not root)."""

from __future__ import annotations

import openai
import pytest

from fixtures.stateful import client, model_of, stateful_server
from qualflow.chaos import faults

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def disk(tmp_path):
    d = tmp_path / "disk"
    why = faults.mount_tmpfs(d, "2m")  # the chaos run's own disk-full means
    if why:
        pytest.skip(f"no tmpfs here: {why}")
    yield d
    faults.unmount(d)


def test_a_response_the_full_store_cannot_write_is_a_500_and_not_recorded_as_stored(
    bundle_dir, tmp_path, disk
):
    srv = stateful_server(bundle_dir, tmp_path / "srv", str(disk / "store.db")).start()
    try:
        c, model = client(srv), model_of(srv)
        ok = c.responses.create(model=model, input="before", max_output_tokens=2)
        faults.fill(disk)  # the disk full, to the last byte
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
