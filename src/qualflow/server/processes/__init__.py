"""The processes of `qualflow serve`: `serve` (the serve process: configs, the socket bound before
anything loads, then the app under its ASGI server, `run_app` with `asgi_servers`), `listen` (the
socket) and, with --api-server-count N > 1, `api_servers` (the serve process supervising one engine
process and N API processes), `api_process` (one of those) and `peers` (what an API process shares
with the others)."""
