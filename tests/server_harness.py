"""A real `qualflow serve` subprocess on a free port (the project's own ServerProcess), and the real app
under uvicorn in-process, for the server tests."""
from __future__ import annotations

import time
from pathlib import Path

import httpx

from qualflow.session.server_process import ServerError, ServerProcess, free_port


class ServerUnderTest(ServerProcess):
    """The project's own server process (qualflow.session.server_process), on a free port of
    127.0.0.1, with the helpers the server tests use."""

    def __init__(self, bundle: str | Path, workdir: Path, *extra: str, model_name: str | None = None):
        self.timing_log = workdir / "timings.jsonl"
        super().__init__(bundle=str(bundle), device="cpu", host="127.0.0.1", port=free_port(), model_name=model_name,
                         timing_log=self.timing_log, log_path=workdir / "server.log", extra_args=list(extra))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self, timeout_s: float = 180) -> "ServerUnderTest":
        super().start()
        try:
            self.wait_healthy(timeout_s)
        except ServerError as e:
            self.stop()
            raise RuntimeError(f"server did not become healthy: {e}") from None
        return self

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
