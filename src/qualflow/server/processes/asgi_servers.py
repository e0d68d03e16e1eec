"""The ASGI servers `qualflow serve` can run its app under (ServerConfig.http_server): uvicorn (the
default) and granian (a Rust HTTP server; the optional extra `serve-native`). Each runs the app on
the socket the serve process bound before anything loaded, until SIGTERM or SIGINT (then re-raised,
as uvicorn does) or `stop()` (thread-safe: the Task's load failed)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from typing import Any

GRACEFUL_S = 5  # uvicorn: a stop waits this long for the open requests


class Uvicorn:
    def __init__(self, app: Any, log_level: str):
        import uvicorn

        self.server = uvicorn.Server(
            uvicorn.Config(
                app,
                log_level=log_level,
                access_log=False,
                lifespan="on",
                timeout_graceful_shutdown=GRACEFUL_S,
            )
        )

    def run(self, sock: socket.socket) -> None:
        self.server.run(sockets=[sock])

    def stop(self) -> None:
        self.server.should_exit = True


class Granian:
    """granian's embedded server (one worker, on this process's event loop) on the bound socket:
    its own listener replaced by a holder of a duplicate of the socket's descriptor."""

    def __init__(self, app: Any, log_level: str):
        from granian.constants import Interfaces
        from granian.log import LogLevels
        from granian.server.embed import Server

        class OnSocket(Server):
            sock: socket.socket

            def _init_shared_socket(self):
                from granian._granian import SocketHolder

                self._ssp = None
                self._shd = SocketHolder(os.dup(self.sock.fileno()), False, self.backlog)

        self.server = OnSocket(
            app,
            interface=Interfaces.ASGI,
            backlog=2048,  # granian admits backlog / workers requests at once
            log_level=LogLevels(log_level),
            log_access=False,
        )
        self.loop: asyncio.AbstractEventLoop | None = None
        self.signals: list[int] = []

    def run(self, sock: socket.socket) -> None:
        self.server.sock = sock
        asyncio.run(self._serve())
        for sig in self.signals[:1]:  # as uvicorn: the signal that stopped the server, re-raised
            signal.signal(sig, signal.SIG_DFL)
            signal.raise_signal(sig)

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self._on_signal, sig)
        await self.server.serve()

    def _on_signal(self, sig: int) -> None:
        self.signals.append(sig)
        self.server.stop()

    def stop(self) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.server.stop)


SERVERS = {"uvicorn": Uvicorn, "granian": Granian}


def asgi_server(name: str, app: Any, log_level: str) -> Uvicorn | Granian:
    """The server `name` (ServerConfig.http_server) around `app`; `run(sock)` serves."""
    return SERVERS[name](app, log_level)
