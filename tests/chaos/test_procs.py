"""A cycle's process tree: each process's role by its place and command line there, and every
process the tree ever held that is still alive, even once reparented."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from qualflow.chaos.procs import Proc, TreeWatcher, live, role, table, tree


@pytest.mark.parametrize(
    ("argv", "parent", "want"),
    [
        (("/v/bin/python", "-m", "qualflow.cli", "serve", "--port", "0"), (), "server"),
        (("/v/bin/python", "/v/bin/qualflow", "session", "--out", "s"), (), "session"),
        (
            ("/v/bin/python", "-c", "from multiprocessing.spawn import spawn_main"),
            ("qualflow", "serve"),
            "engine",
        ),
        (
            ("/v/bin/python", "-c", "from multiprocessing.resource_tracker import main"),
            ("qualflow", "serve"),
            None,
        ),
        (("aiperf worker_d997ba51",), ("aiperf system_controller",), "aiperf-worker"),
        (("aiperf dataset_manager",), ("aiperf system_controller",), None),
        (("/bin/bash", "-c", "qualflow serve"), ("/bin/bash",), None),
    ],
)
def test_a_process_is_named_by_its_command_line_and_its_parent(argv, parent, want):
    procs = {1: Proc(1, 0, 0, ("snakemake",)), 2: Proc(2, 1, 0, parent), 3: Proc(3, 2, 0, argv)}
    assert role(procs[3], procs, root=1) == want
    assert role(procs[1], procs, root=1) == "snakemake"


def test_the_watcher_finds_a_process_by_its_place_in_the_tree_and_what_is_left(tmp_path):
    """A child `qualflow serve` (by its command line) of the watched root is a server, and a
    child of it an engine; once the root ends, the grandchild left alive is reported."""
    script = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)  # spawn_main'])\n"
        "time.sleep(60)\n"
    )
    fake = tmp_path / "qualflow"
    fake.write_text(f"#!{sys.executable}\n{script}")
    fake.chmod(0o755)
    runner = f"import subprocess; subprocess.run({[str(fake), 'serve']!r})"
    root = subprocess.Popen([sys.executable, "-c", runner])
    w = TreeWatcher(root.pid, period_s=0.05).start()
    try:
        deadline = time.monotonic() + 60
        while not w.find("engine") and time.monotonic() < deadline:
            time.sleep(0.05)
        server, engine = w.find("server"), w.find("engine")
        assert len(server) == 1 and len(engine) == 1
        procs = table()
        assert role(procs[root.pid], procs, root.pid) == "snakemake"
        assert {p.pid for p in tree(root.pid, procs)} >= {server[0].pid, engine[0].pid}
        root.kill()
        root.wait()
        os.kill(server[0].pid, 9)
        w.poll()
    finally:
        w.stop()
    left = w.left()
    assert [p.pid for p in left] == [engine[0].pid]  # reparented, still found by the record
    os.kill(engine[0].pid, 9)
    deadline = time.monotonic() + 10
    while live(engine[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not w.left()
