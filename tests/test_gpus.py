"""Exclusive GPU leases, tested without GPUs: fake device ids, concurrent holders, no overlap, the
lock released when its holder crashes or is interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from qualflow.gpus import Gpu, GpuLeaseError, acquire, core_share, holders, parse_gpus, visible_gpus

GPUS = [Gpu(0, "GPU-aaa", "Fake H200"), Gpu(1, "GPU-bbb", "Fake H200")]


def test_two_sessions_get_two_gpus_and_a_third_waits(tmp_path):
    a = acquire("cuda", gpus=GPUS, lock_dir=tmp_path, holder={"job": "a"})
    b = acquire("cuda", gpus=GPUS, lock_dir=tmp_path, holder={"job": "b"})
    assert {a.gpu.index, b.gpu.index} == {0, 1}
    assert a.env()["CUDA_VISIBLE_DEVICES"] != b.env()["CUDA_VISIBLE_DEVICES"]
    assert sorted(h["job"] for h in holders(tmp_path)) == ["a", "b"]
    with pytest.raises(GpuLeaseError, match="no GPU free after 0s"):
        acquire("cuda", gpus=GPUS, lock_dir=tmp_path, timeout_s=0.3, poll_s=0.1)
    b.release()
    c = acquire("cuda", gpus=GPUS, lock_dir=tmp_path, timeout_s=1)
    assert c.gpu.index == b.gpu.index
    a.release(), c.release()
    assert holders(tmp_path) == []


def test_cuda_n_pins_one_gpu(tmp_path):
    with acquire("cuda:1", gpus=GPUS, lock_dir=tmp_path) as lease:
        assert lease.gpu == GPUS[1]
        with pytest.raises(GpuLeaseError):
            acquire("cuda:1", gpus=GPUS, lock_dir=tmp_path, timeout_s=0.2, poll_s=0.05)
        assert acquire("cuda", gpus=GPUS, lock_dir=tmp_path).gpu == GPUS[0]  # the other one is free
    with pytest.raises(GpuLeaseError, match="no GPU 7 here"):
        acquire("cuda:7", gpus=GPUS, lock_dir=tmp_path)
    with pytest.raises(GpuLeaseError, match="no GPU is visible"):
        acquire("cuda", gpus=[], lock_dir=tmp_path)
    with pytest.raises(GpuLeaseError, match="is not 'cuda' or 'cuda:N'"):
        acquire("cuda:\u00b2", gpus=GPUS, lock_dir=tmp_path)  # a digit to isdigit(), not to int()


# The holder sets the SIGINT disposition the ctrl-c case relies on: a test run started as a
# background job of a non-interactive shell (`bash -c 'pytest ... &'`) inherits SIGINT ignored.
HOLD = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from qualflow.gpus import Gpu, acquire
gpus = [Gpu(0, "GPU-aaa", "Fake")]
lease = acquire("cuda:0", gpus=gpus, lock_dir=sys.argv[1], holder={"job": "child"})
print("held", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["crash", "ctrl-c"])
def test_the_lock_is_released_when_its_holder_dies(tmp_path, sig):
    p = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout.readline().strip() == "held"
    assert [h["job"] for h in holders(tmp_path)] == ["child"]
    with pytest.raises(GpuLeaseError):
        acquire("cuda:0", gpus=GPUS, lock_dir=tmp_path, timeout_s=0.2, poll_s=0.05)
    os.kill(p.pid, sig)
    p.wait(timeout=20)
    with acquire("cuda:0", gpus=GPUS, lock_dir=tmp_path, timeout_s=5) as lease:
        assert lease.gpu.index == 0
        assert json.loads((tmp_path / "gpu0.lock").read_text())["pid"] == os.getpid()


def test_cores_split_evenly_and_devices_parse():
    assert core_share(0, 2, list(range(8))) == [0, 1, 2, 3] and core_share(
        1, 2, list(range(8))
    ) == [4, 5, 6, 7]
    assert core_share(0, 4, [0, 1]) == [0]
    assert parse_gpus("0:GPU-aaa:NVIDIA H200,1:GPU-bbb:NVIDIA H200") == [
        Gpu(0, "GPU-aaa", "NVIDIA H200"),
        Gpu(1, "GPU-bbb", "NVIDIA H200"),
    ]
    assert visible_gpus({"QUALFLOW_GPUS": "3:GPU-c:X"}) == [Gpu(3, "GPU-c", "X")]
