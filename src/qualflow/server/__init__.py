"""The Responses API server: `qualflow serve --bundle B` (protocol models / Responses handler / HTTP app /
timing records)."""
from __future__ import annotations

import argparse
import errno
import logging
import socket
import sys
import time


class PortBusy(OSError):
    """The port is held by another process: an input error (exit status 2)."""


def bind(host: str, port: int) -> socket.socket:
    """Bind and listen up front, before the model loads, and hold the socket: a second server on the
    port fails here. (SO_REUSEADDR lets two sockets bind one port while neither listens; listening at
    once closes that window, and a loser of the race fails in listen().)"""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        why = "is already in use" if e.errno == errno.EADDRINUSE else f"cannot be bound ({e.strerror})"
        raise PortBusy(f"port {port} on {host} {why}") from None
    sock.set_inheritable(True)
    return sock


def serve(bundle: str, device: str = "cpu", host: str = "127.0.0.1", port: int = 8000,
          model_name: str | None = None, max_batch: int = 8, max_context: int | None = 4096,
          cpu_threads: int | None = None,
          timing_log: str | None = None, max_queue: int = 512, max_body_bytes: int = 8 << 20,
          gil_switch_ms: float = 1.0, engine_process: bool = False,
          step_delay_s: float = 0.0, log_level: str = "info") -> int:
    """Run the server until interrupted. Returns the process exit code: 2 for a busy port, 1 if the Task
    failed to load."""
    started_ns = time.time_ns()
    try:
        sock = bind(host, port)
    except PortBusy as e:
        print(f"qualflow serve: error: {e}", file=sys.stderr, flush=True)
        return 2
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"qualflow serve: warning: bound to {host}, reachable beyond this machine; the server has no "
              "authentication", file=sys.stderr, flush=True)
    if gil_switch_ms:   # the engine thread gets the GIL back sooner after its GPU wait
        sys.setswitchinterval(gil_switch_ms / 1000)
    import uvicorn

    from qualflow.runtime import EngineConfig, load_task

    from .app import create_app

    failed: list[BaseException] = []
    server: uvicorn.Server | None = None

    def on_load_error(e: BaseException) -> None:
        failed.append(e)
        server.should_exit = True

    if cpu_threads:  # intra-op threads; on a box shared with the load generator, fewer spin less
        import torch
        torch.set_num_threads(cpu_threads)
    engine = EngineConfig(device=device, max_batch=max_batch, max_context=max_context or 0, step_delay_s=step_delay_s,
                          engine_process=engine_process, cpu_threads=cpu_threads or 0, gil_switch_ms=gil_switch_ms)
    app = create_app(lambda: load_task(bundle, engine),
                     model_name=model_name, timing_log=timing_log, started_ns=started_ns,
                     on_load_error=on_load_error, max_queue=max_queue, max_body_bytes=max_body_bytes)
    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="on",
                            timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    actual = sock.getsockname()[1]
    print(f"qualflow serve: listening on http://{host}:{actual} (bundle {bundle}, device {device})",
          file=sys.stderr, flush=True)
    server.run(sockets=[sock])
    if failed:
        print(f"qualflow serve: error: task load failed: {failed[0]}", file=sys.stderr, flush=True)
        return 1
    return 0


def add_serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bundle", required=True, help="bundle directory (qualflow build --out)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port (printed on stderr)")
    p.add_argument("--model-name", default=None, help="served model name (default: the bundle's checkpoint id)")
    p.add_argument("--max-batch", type=int, default=8, help="requests decoded together (KV cache slots)")
    p.add_argument("--max-context", type=int, default=4096,
                   help="tokens per request (prompt + output), at most the bundle's context limit; sizes the KV "
                        "cache (max_batch x max_context), so the full 40k of Qwen3 is opt-in")
    p.add_argument("--cpu-threads", type=int, default=None,
                   help="torch intra-op threads (default: torch's choice); 1 when AIPerf shares a small CPU")
    p.add_argument("--timing-log", default=None, help="append one JSONL Task timing record per request")
    p.add_argument("--max-queue", type=int, default=512,
                   help="requests that may wait beyond the running batch; more are answered 429 + Retry-After")
    p.add_argument("--max-body-bytes", type=int, default=8 << 20, help="request body cap (413 above it)")
    p.add_argument("--gil-switch-ms", type=float, default=1.0,
                   help="Python's thread switch interval (0: leave the default of 5 ms)")
    p.add_argument("--engine-process", action="store_true",
                   help="run the engine (model, KV cache, device) in its own process, so the HTTP side's work "
                        "overlaps the GPU step instead of sharing one GIL with it")
    p.add_argument("--step-delay-s", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])


def main_serve(args: argparse.Namespace) -> int:
    return serve(args.bundle, device=args.device, host=args.host, port=args.port, model_name=args.model_name,
                 max_batch=args.max_batch, max_context=args.max_context,
                 cpu_threads=args.cpu_threads, timing_log=args.timing_log, max_queue=args.max_queue,
                 max_body_bytes=args.max_body_bytes, gil_switch_ms=args.gil_switch_ms,
                 engine_process=args.engine_process, step_delay_s=args.step_delay_s,
                 log_level=args.log_level)
