"""The Responses API server: `qualflow serve --bundle B`.

The typed core: `protocol/` (the wire models: request, response, stream events, ApiError),
`handler` (CreateResponse -> Response or an event stream, over the public Task API; with
`supported`, `thinking`, `message_stream`, `reasoning_stream` and `task_events`), `admission`
(limits) and `timing` (per-request records). The thin HTTP layer that renders it:
`app.create_app`, assembled from `http/`. The processes that run it: `processes/` (`serve`: config,
socket, uvicorn). `config`: ServerConfig."""

from __future__ import annotations

from .processes.listen import PortBusy, bind
from .processes.serve import add_serve_args, main_serve, serve

__all__ = ["PortBusy", "add_serve_args", "bind", "main_serve", "serve"]
