"""The listening socket of `qualflow serve`, bound before the model loads."""

from __future__ import annotations

import errno
import socket


class PortBusy(OSError):
    """The port is held by another process: an input error (exit status 2)."""


def bind(host: str, port: int) -> socket.socket:
    """Bind and listen up front, before the model loads, and hold the socket: a second server on
    the port fails here. (SO_REUSEADDR lets two sockets bind one port while neither listens;
    listening at once closes that window, and a loser of the race fails in listen().)"""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        why = (
            "is already in use"
            if e.errno == errno.EADDRINUSE
            else f"cannot be bound ({e.strerror})"
        )
        raise PortBusy(f"port {port} on {host} {why}") from None
    sock.set_inheritable(True)
    return sock
