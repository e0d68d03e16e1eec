"""A real `qualflow serve` subprocess on a free port, for the server tests."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx


class ServerUnderTest:
    def __init__(self, bundle: str | Path, workdir: Path, *extra: str, model_name: str | None = None):
        self.log_path = workdir / "server.log"
        self.timing_log = workdir / "timings.jsonl"
        self.cmd = [sys.executable, "-m", "qualflow.cli", "serve", "--bundle", str(bundle), "--port", "0",
                    "--timing-log", str(self.timing_log), *extra]
        if model_name:
            self.cmd += ["--model-name", model_name]
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self, timeout_s: float = 180) -> "ServerUnderTest":
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            if not self.url and (m := re.search(r"listening on (http://[\d.]+:\d+)", self.log())):
                self.url = m.group(1)
            if self.url:
                try:
                    if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"server not healthy after {timeout_s}s:\n{self.log()}")

    def client(self, **kw):
        import openai
        return openai.OpenAI(base_url=self.url + "/v1", api_key="x", max_retries=0, **kw)

    def records(self, *request_ids: str, **params) -> list[dict]:
        if request_ids:
            params["request_ids"] = ",".join(request_ids)
        r = httpx.get(self.url + "/v1/qualflow/task-timings", params=params, timeout=10)
        r.raise_for_status()
        return r.json()["data"]

    def wait_record(self, request_id: str, timeout_s: float = 10) -> dict:
        """The record once final (http_sent_ns is set after the last byte is handed over)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            recs = self.records(request_id)
            if recs and recs[0]["http_sent_ns"] is not None:
                return recs[0]
            time.sleep(0.05)
        raise AssertionError(f"no final timing record for {request_id}: {self.records(request_id)}")

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


class InProcessServer:
    """The real app under real uvicorn on a thread of this process, on the port `qualflow serve` would
    bind (qualflow.server.bind): for tests that need to reach into the Task (fault injection)."""

    def __init__(self, app):
        import uvicorn

        from qualflow.server import bind
        self.sock = bind("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on",
                                                    timeout_graceful_shutdown=2))
        self.thread = None

    def __enter__(self) -> "InProcessServer":
        import threading
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("in-process server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
        self.sock.close()

    def records(self, **params) -> list[dict]:
        return httpx.get(self.url + "/v1/qualflow/task-timings", params=params, timeout=10).json()["data"]
