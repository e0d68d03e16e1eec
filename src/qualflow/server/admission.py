"""Admission control and request limits, before any work is done for a request: a bounded number of
requests in the server (running + waiting), a body-size cap, JSON-only bodies. Each refusal is an
ApiError in OpenAI's shape; a 429 and a 503-while-loading carry Retry-After."""

from __future__ import annotations

from .protocol.errors import ApiError

DEFAULT_MAX_BODY_BYTES = 8 << 20


def at_capacity(active: int, limit: int) -> ApiError:
    return ApiError(
        429,
        f"The server is at capacity: {active} requests are running or waiting "
        f"(limit {limit}). Retry shortly.",
        "requests",
        None,
        "rate_limit_exceeded",
        retry_after=1,
    )


class Admission:
    """Counts requests from admission until their record is final. `limit` = the Task's batch
    plus the waiting queue; past it a request is answered 429 at once."""

    def __init__(self, limit: int):
        self.limit, self.active = limit, 0

    def fit(self, limit: int) -> None:
        """The limit, once the Task (its batch) is known."""
        self.limit = limit

    def enter(self) -> None:
        if self.active >= self.limit:
            raise at_capacity(self.active, self.limit)
        self.active += 1

    def leave(self) -> None:
        self.active -= 1


class SharedAdmission:
    """Admission across the API processes of one server (`--api-server-count`): one semaphore of
    `limit` (the batch plus the queue, set by the serve process) that they all take from, so the
    server admits at most `limit` requests in all, whichever process accepted them, exactly as
    one API process would. `active` counts every process's requests, `admitted` this one's so
    far."""

    def __init__(self, semaphore, limit: int):
        self.semaphore, self.limit = semaphore, limit
        self.admitted = 0  # by this process, in all

    @property
    def active(self) -> int:
        return self.limit - self.semaphore.get_value()

    def fit(self, limit: int) -> None:
        """Sized by the serve process from the same settings (max_batch + max_queue)."""

    def enter(self) -> None:
        if not self.semaphore.acquire(False):
            raise at_capacity(self.active, self.limit)
        self.admitted += 1

    def leave(self) -> None:
        self.semaphore.release()


def check_content_type(value: str | None) -> None:
    media = (value or "").split(";", 1)[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise ApiError(
            415,
            f"Unsupported Content-Type {value!r}: the body must be JSON sent as "
            "'application/json'.",
            "invalid_request_error",
            None,
            "unsupported_content_type",
        )


def too_large(n: int | str, cap: int) -> ApiError:
    return ApiError(
        413,
        f"The request body ({n} bytes) exceeds this server's limit of {cap} bytes.",
        "invalid_request_error",
        None,
        "request_too_large",
    )


class ClientLeft(Exception):
    """The client disconnected before its body was read."""


async def read_body(declared: str | None, receive, cap: int) -> bytes:
    """The whole body from ASGI `receive`, refusing (413) as soon as it is known to exceed `cap`
    bytes (`declared`: the Content-Length header). Raises ClientLeft if the client disconnects
    first."""
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > cap:
        raise too_large(declared, cap)
    chunks, n = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientLeft("the client disconnected before its request body was read")
        chunk = message.get("body", b"")
        n += len(chunk)
        if n > cap:
            raise too_large(f"more than {n}", cap)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
