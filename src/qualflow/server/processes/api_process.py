"""One of the N API processes of `qualflow serve --api-server-count N` (api_servers starts them
with multiprocessing spawn): the app under its ASGI server on the listening socket the serve process
bound, its Task attached to the shared engine process over this process's own link, admission
taken from the server's shared semaphore, timing records appended to the server's one log. Its
log lines name it (`[api I pid P]`). It lives exactly as long as the serve process (killed when
that dies)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
from dataclasses import dataclass
from typing import Any

from qualflow.lifetime import die_with_parent

from ..admission import SharedAdmission
from ..config import EngineConfig, ServerConfig
from .peers import Peers
from .run_app import run_app, tune_process


@dataclass(frozen=True)
class ApiProcess:
    """What the serve process hands API process `index` of `count` (its spawn arguments besides the
    socket and the configs)."""

    index: int
    count: int
    link: Any  # runtime LinkEnds: this process's pipe ends to the engine process
    admission: Any  # the server's multiprocessing Semaphore of `admission_limit`
    admission_limit: int
    ready: Any  # a multiprocessing Semaphore counting the API processes that are ready
    started_ns: int  # when `qualflow serve` started (startup_s on /health counts from it)
    parent_pid: int


def attach_task(bundle: str, engine: EngineConfig, link: Any) -> Any:
    from qualflow.runtime import Task

    return Task.attached(bundle, engine, link)


def main(sock: socket.socket, me: ApiProcess, server: ServerConfig, engine: EngineConfig) -> None:
    die_with_parent(signal.SIGKILL)
    if os.getppid() != me.parent_pid:  # the serve process died before the request above took effect
        os._exit(0)
    logging.basicConfig(
        level=server.log_level.upper(),
        format=f"%(asctime)s %(levelname)s %(name)s [api {me.index} pid %(process)d]: %(message)s",
    )
    tune_process(engine)
    # libuv (uvloop, uvicorn's loop where installed) accepts every pending connection at once; told
    # to yield after each, it leaves the others to the API processes woken with it, so a burst of
    # connections is spread over them instead of landing in the first one awake
    os.environ.setdefault("UV_TCP_SINGLE_ACCEPT", "1")
    peers = Peers(me.index, me.count, SharedAdmission(me.admission, me.admission_limit), me.ready)
    code = run_app(
        server, sock, lambda: attach_task(server.bundle, engine, me.link), me.started_ns, peers
    )
    sys.exit(code)
