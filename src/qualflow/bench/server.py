"""`qualflow bench server`: the server's speed against the Task's and against our own harness
ceiling, per point, in one call.

On a Qwen3-0.6B-shaped fp16 bundle (seeded random weights; the `tiny` preset on cpu), ISL/OSL 128,
ignore_eos, greedy: the AIPerf requests carry --request-sampling (default {"temperature":0}) beside
ignore_eos and min_tokens, so the server does the Task's work ('{}' sends the server's default).
  1. the Task alone (qualflow.bench.point.run_point, in this process) at each point;
  2. `qualflow serve` + the published AIPerf (responses, streaming) at the same points;
  3. the harness ceiling: `qualflow serve --engine synthetic --step-ms <ceiling-step-ms>` (same
     bundle, tokenizer, HTTP path, timing records; no model) + the same AIPerf points.
Prints Task, server and ceiling side by side per point and where a server request's time went, then
this run against the newest committed result of the same device and settings in --results (or
--baseline), and writes <out>/<date>-server.json in the results schema. --mode scaling measures only
the ceiling at each AIPerf workers:record_processors pair of --grid (the figures to set the pilot's
`aiperf:` section from). --mode http measures the HTTP part of a c1 request under each ASGI server
of --http-servers, alternated (http_path). --mode store runs the points with the response store off
and on (SQLite), alternated (store_ab).

    qualflow bench server --work /tmp/speed --out $OUT"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import shlex
import shutil
import subprocess
from pathlib import Path

from qualflow.configs import from_args

from . import server_report, server_tables
from .config import ServerBenchConfig
from .server_procs import Server, aiperf_point, qualflow


def _device_name(device: str) -> str:
    if device == "cpu":
        return "cpu"
    return (
        subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
        .stdout.splitlines()[0]
        .strip()
    )


def resolved(cfg: ServerBenchConfig) -> ServerBenchConfig:
    """The settings a run uses: each 0 or empty field at its device's default."""
    device = cfg.device
    if device == "auto":
        gpu = (
            shutil.which("nvidia-smi")
            and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
        )
        device = "cuda" if gpu else "cpu"
    cuda = device == "cuda"
    preset = cfg.preset or ("qwen3-0.6b" if cuda and cfg.mode in ("speed", "store") else "tiny")
    return dataclasses.replace(
        cfg,
        device=device,
        preset=preset,
        out=cfg.out or str(Path(cfg.work) / "out"),
        points=cfg.points or {"scaling": "64 256", "store": "64"}.get(cfg.mode, "1 64 256"),
        max_batch=cfg.max_batch or (64 if cuda else 8),
        workers=cfg.workers or (8 if cuda else 1),
        record_processors=cfg.record_processors or (4 if cuda else 1),
        ceiling_api_servers=cfg.ceiling_api_servers or cfg.api_servers,
    )


def requests(cfg: ServerBenchConfig, c: int) -> int:
    """Requests per point: at least ~5 s of steady state per point on an H200 by default."""
    return cfg.requests or {1: 48, 64: 2048}.get(c, 12 * c)


def settings(cfg: ServerBenchConfig, device_name: str, ceiling_batch: int) -> dict:
    """What the result records of its settings (as strings: what a baseline is matched on)."""
    return {
        k: str(v)
        for k, v in {
            "device": cfg.device,
            "device_name": device_name,
            "preset": cfg.preset,
            "isl": cfg.isl,
            "osl": cfg.osl,
            "max_batch": cfg.max_batch,
            "aiperf_workers": cfg.workers,
            "aiperf_record_processors": cfg.record_processors,
            "ceiling_step_ms": f"{cfg.ceiling_step_ms:g}",
            "ceiling_max_batch": ceiling_batch,
            "serve_flags": cfg.serve_flags,
            "request_sampling": cfg.request_sampling,
            "mode": cfg.mode,
            "api_servers": cfg.api_servers,
            "ceiling_api_servers": cfg.ceiling_api_servers,
        }.items()
    }


def bundle_of(cfg: ServerBenchConfig) -> Path:
    """The preset's embedded checkpoint, pinned and built (fp16) once under --work."""
    work, preset = Path(cfg.work), cfg.preset
    bundle = work / f"bundle-{preset}"
    if not (bundle / "manifest.json").exists():
        qualflow("embedded", "--out", str(work / f"ckpt-{preset}"), "--preset", preset)
        qualflow(
            "pin",
            "--checkpoint",
            str(work / f"ckpt-{preset}"),
            "--out",
            str(work / f"pin-{preset}.json"),
        )
        qualflow(
            "build",
            "--pin",
            str(work / f"pin-{preset}.json"),
            "--profile",
            "fp16",
            "--out",
            str(bundle),
            "--force",
        )
    return bundle


def run_task(cfg: ServerBenchConfig, bundle: Path, points: list[int]) -> None:
    """The Task alone at each point, the same request counts as the AIPerf points ->
    <work>/task_level.json."""
    from qualflow.runtime import EngineConfig, load_task

    from .point import run_point

    task = load_task(
        str(bundle),
        EngineConfig(device=cfg.device, max_batch=cfg.max_batch, max_context=cfg.max_context),
    )
    res = {"load_timing": task.load_timing, "isl": cfg.isl, "osl": cfg.osl}
    try:  # warm-up: every batch size once
        asyncio.run(run_point(task, cfg.max_batch, cfg.isl, min(16, cfg.osl), cfg.max_batch))
        for c in points:
            r = res[f"c{c}"] = asyncio.run(run_point(task, c, cfg.isl, cfg.osl, requests(cfg, c)))
            print(
                f"Task c{c}: {r['output_tok_per_s']:.0f} tok/s  TTFT p50 "
                f"{r['ttft_ms_p50']:.1f} ms  ITL p50 {r['itl_ms_p50']:.2f} ms",
                flush=True,
            )
    finally:
        task.close()
    Path(cfg.work, "task_level.json").write_text(json.dumps(res, indent=2))


def _aiperf_points(cfg, bundle: Path, folder: Path, server: Server, points: list[int]) -> None:
    try:
        for c in points:
            aiperf_point(
                cfg, bundle, folder, c, requests(cfg, c), (cfg.workers, cfg.record_processors)
            )
    finally:
        server.stop()


def speed(cfg: ServerBenchConfig, bundle: Path, points: list[int], sets: dict) -> None:
    work = Path(cfg.work)
    if not (cfg.skip_task and (work / "task_level.json").exists()):
        run_task(cfg, bundle, points)
    for d in ("server", "ceiling"):
        shutil.rmtree(work / d, ignore_errors=True)
    flags = ["--device", cfg.device, *shlex.split(cfg.serve_flags)]
    server = Server(cfg, bundle, work / "server", cfg.max_batch, cfg.api_servers, flags)
    _aiperf_points(cfg, bundle, work / "server", server, points)
    if not cfg.skip_ceiling:
        ceiling = Server(
            cfg,
            bundle,
            work / "ceiling",
            int(sets["ceiling_max_batch"]),
            cfg.ceiling_api_servers,
            _ceiling_flags(cfg),
        )
        _aiperf_points(cfg, bundle, work / "ceiling", ceiling, points)
    name = cfg.name or f"{dt.datetime.now(dt.UTC).date()}-server.json"
    server_report.report(cfg.work, cfg.out, name, cfg.baseline, points, sets, Path(cfg.results))


def _ceiling_flags(cfg: ServerBenchConfig) -> list[str]:
    return ["--engine", "synthetic", "--step-ms", f"{cfg.ceiling_step_ms:g}", "--device", "cpu"]


def scaling(cfg: ServerBenchConfig, bundle: Path, points: list[int], sets: dict) -> None:
    folder = Path(cfg.work) / "scaling"
    shutil.rmtree(folder, ignore_errors=True)
    ceiling = Server(
        cfg,
        bundle,
        folder,
        int(sets["ceiling_max_batch"]),
        cfg.ceiling_api_servers,
        _ceiling_flags(cfg),
    )
    grid = cfg.grid.split()
    try:
        for pair in grid:
            w, rp = (int(x) for x in pair.split(":"))
            for c in points:
                aiperf_point(
                    cfg, bundle, folder / f"w{w}_rp{rp}", c, c * cfg.scaling_requests_per_c, (w, rp)
                )
    finally:
        ceiling.stop()
    tag = server_report.device_tag(sets["device_name"])
    name = cfg.name or f"{dt.datetime.now(dt.UTC).date()}-{tag}-ceiling-scaling.json"
    server_report.scaling(cfg.work, cfg.out, name, grid, points, sets)


def store_mode(cfg: ServerBenchConfig, bundle: Path, points: list[int], sets: dict) -> int:
    """--mode store: the points with the response store off and on, alternated (store_ab)."""
    from . import store_ab

    res = store_ab.store_ab(cfg, bundle, points, sets, lambda c: requests(cfg, c))
    store_ab.print_store(res, store_ab.previous(Path(cfg.results), res))
    store_ab.write(res, cfg.out, cfg.name)
    return 0


def run_server_bench(cfg: ServerBenchConfig) -> int:
    cfg = resolved(cfg)
    points = [int(c) for c in cfg.points.split()]
    Path(cfg.work).mkdir(parents=True, exist_ok=True)
    Path(cfg.out).mkdir(parents=True, exist_ok=True)
    # the ceiling's synthetic engine holds every request of the largest point (no memory to run
    # out of): queued behind the stack's batch, it would measure that batch, not the HTTP path
    sets = settings(cfg, _device_name(cfg.device), max(cfg.max_batch, *points))
    bundle = bundle_of(cfg)
    if cfg.mode == "http":
        from . import http_path

        http_path.write(http_path.http_path(cfg, bundle, sets["device_name"]), cfg.out, cfg.name)
        return 0
    if cfg.mode == "store":
        return store_mode(cfg, bundle, points, sets)
    (scaling if cfg.mode == "scaling" else speed)(cfg, bundle, points, sets)
    return 0


def main_bench_server(args: argparse.Namespace) -> int:
    if getattr(args, "brief", None):
        server_tables.brief(args.brief)
        return 0
    return run_server_bench(from_args(ServerBenchConfig, args))
