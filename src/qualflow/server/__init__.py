"""The Responses API server: `qualflow serve --bundle B`.

The typed core: `protocol` (request / response / event models, ApiError), `responses` (the handler:
CreateResponse -> Response or an event stream, over the public Task API), `admission` (limits) and
`timing` (per-request records). The thin HTTP layer that renders it: `app.create_app`, assembled from
`http/`. The process: `serve` (config, socket, uvicorn), `listen` (the socket), `config`
(ServerConfig)."""
from __future__ import annotations

from .listen import PortBusy, bind
from .serve import add_serve_args, main_serve, serve

__all__ = ["PortBusy", "add_serve_args", "bind", "main_serve", "serve"]
