"""Owning a server child process (`qualflow serve`, or an endpoint's launch command): port check,
start, health wait, crash detection, stop.

The server runs in its own process group (so a terminal Ctrl-C reaches only its owner, which
stops it in order) and with PR_SET_PDEATHSIG=SIGTERM (so it dies even if its owner is SIGKILLed).
`stop()` sends SIGTERM to the whole group, escalates to SIGKILL, and waits until the port is free
again."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from qualflow.configs import to_argv
from qualflow.lifetime import own_child

if TYPE_CHECKING:  # the configs are read, not built, here: importing them would load the runtime
    from qualflow.server.config import EngineConfig, ServerConfig


class ServerError(RuntimeError):
    pass


class PortConflict(ServerError):
    pass


class ServerCrashed(ServerError):
    pass


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def who_listens(port: int) -> str:
    """Best effort: name the process holding a TCP port (via `ss`)."""
    try:
        out = subprocess.run(
            ["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
        return out or "unknown process"
    except (OSError, subprocess.SubprocessError):
        return "unknown process"


def check_port(host: str, port: int) -> None:
    if not port_is_free(host, port):
        raise PortConflict(
            f"port conflict: {host}:{port} is already in use ({who_listens(port)}); "
            "stop that process or set server.port in the config (0 picks a free port)"
        )


def http_get_json(url: str, timeout: float = 5.0) -> tuple[int, dict | None]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            body = r.read()
            return r.status, (json.loads(body) if body else None)
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read() or b"null")
        except ValueError:
            return e.code, None


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, read from /proc (Linux)."""
    pids = []
    for d in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                pids.append(int(d))
    return pids


class OwnedServer:
    """A server child process this process owns, started as `argv` (its exact command; `.cmd` is it
    shell-quoted), answering on host:port."""

    def __init__(self, argv: Sequence[str], *, host: str, port: int, log_path: str | Path):
        self.host, self.port = host, port
        self.log_path = Path(log_path)
        self.argv = list(argv)
        self.cmd = shlex.join(self.argv)
        self.env: dict[str, str] = {}  # added to the server's environment (e.g. its GPU)
        self.proc: subprocess.Popen | None = None
        self.spawn_ns: int | None = None
        self.healthy_ns: int | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        check_port(self.host, self.port)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # This server's own log: a new file (never truncating, or appending to, a file an archive
        # of an earlier run may still share), so its crash reason quotes only its own lines.
        self.log_path.unlink(missing_ok=True)
        self._log = open(self.log_path, "wb")
        env = dict(os.environ, PYTHONUNBUFFERED="1", **self.env)
        self.spawn_ns = time.time_ns()
        self.proc = subprocess.Popen(
            self.argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            preexec_fn=own_child,
        )

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise ServerCrashed(
                f"server (pid {self.proc.pid}) exited with code {self.proc.returncode}; "
                f"last lines of {self.log_path}:\n{self.log_tail()}"
            )

    poll_s = 0.25

    def probe(self) -> tuple[dict | None, object]:
        """One readiness check: (what to record once ready, else None; what was seen)."""
        status, body = http_get_json(self.url + "/health", timeout=2.0)
        return ((body or {}) if status == 200 else None), (status, body)

    def not_ready(self, timeout_s: float, last) -> Exception:
        return ServerError(
            f"server at {self.url} not healthy after {timeout_s:.0f}s (last: {last}); "
            f"last lines of {self.log_path}:\n{self.log_tail()}"
        )

    def wait_healthy(self, timeout_s: float) -> dict:
        """Poll `probe` until ready (noticing a crash on the way), or raise `not_ready`."""
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                ready, last = self.probe()
                if ready is not None:
                    self.healthy_ns = time.time_ns()
                    return ready
            except (OSError, ValueError) as e:
                last = repr(e)
            time.sleep(self.poll_s)
        raise self.not_ready(timeout_s, last)

    def stop(self, grace_s: float = 20.0) -> int | None:
        """Stop the whole process group; idempotent; returns the exit code."""
        p = self.proc
        if p is None:
            return None
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        # The leader is gone; members of its group (the server's own children) may still be exiting,
        # or may have ignored SIGTERM: wait for them, then kill what is left.
        deadline = time.monotonic() + grace_s
        while _group_members(p.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _group_members(p.pid):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            while _group_members(p.pid) and time.monotonic() < deadline + 5:
                time.sleep(0.05)
        deadline = time.monotonic() + 10
        while not port_is_free(self.host, self.port) and time.monotonic() < deadline:
            time.sleep(0.2)
        if getattr(self, "_log", None):
            self._log.close()
            self._log = None
        return p.returncode


def serve_argv(server: ServerConfig, engine: EngineConfig) -> list[str]:
    """The `qualflow serve` command that runs with exactly these configs."""
    return [sys.executable, "-m", "qualflow.cli", "serve", *to_argv(server), *to_argv(engine)]


class ServerProcess(OwnedServer):
    """`qualflow serve` as a child process, with exactly `server` and `engine` as its settings."""

    def __init__(self, server: ServerConfig, engine: EngineConfig, *, log_path: str | Path):
        self.server, self.engine = server, engine
        super().__init__(
            serve_argv(server, engine), host=server.host, port=server.port, log_path=log_path
        )
