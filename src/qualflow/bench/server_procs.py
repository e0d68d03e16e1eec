"""The processes `qualflow bench server` runs: a `qualflow serve` on the bench's port (the stack's
server, or the ceiling's synthetic engine) and one published AIPerf point against it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from .config import ServerBenchConfig

QUALFLOW = [sys.executable, "-m", "qualflow.cli"]


def qualflow(*args: str) -> None:
    """A qualflow stage in a child process (as the workflow's rules call it)."""
    subprocess.run([*QUALFLOW, *args], check=True)


class Server:
    """One `qualflow serve` on the port, its timing log and log in `folder`; `stop()` ends it and
    prints what each API process said it admitted (the spread over several)."""

    def __init__(
        self,
        cfg: ServerBenchConfig,
        bundle: Path,
        folder: Path,
        max_batch: int,
        api: int,
        flags: list[str],
        port: int | None = None,
    ):
        """`port`: where it listens (default the bench's --port)."""
        port = port or cfg.port
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "timing.jsonl").unlink(missing_ok=True)
        self.api, self.log = api, folder / "server.log"
        cmd = [
            *QUALFLOW,
            "serve",
            "--bundle",
            str(bundle),
            "--port",
            str(port),
            "--model-name",
            "speed",
            "--max-batch",
            str(max_batch),
            "--max-context",
            str(cfg.max_context),
            "--timing-log",
            str(folder / "timing.jsonl"),
            "--log-level",
            "warning",
            "--api-server-count",
            str(api),
            *flags,
        ]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        self._wait_healthy(port)

    def _wait_healthy(self, port: int) -> None:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    print(r.read().decode(), flush=True)
                    return
            except OSError:
                if self.proc.poll() is not None:
                    tail = "\n".join(self.log.read_text().splitlines()[-20:])
                    raise RuntimeError(f"server died:\n{tail}") from None
                time.sleep(1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait()
        for line in self.log.read_text().splitlines():
            if "admitted" in line and "requests" in line:
                print(line)


def extra_inputs(cfg: ServerBenchConfig) -> str:
    """What every AIPerf request carries beside the prompt: ignore_eos, min_tokens and the sampling
    fields of --request-sampling. No `store`: a server with a store keeps every response by default
    (as OpenAI's), one without stores nothing, and AIPerf counts the tokens itself (`store: true`
    would make it take them from the usage of `response.completed`, which an `ignore_eos` turn
    ended by max_output_tokens does not send: it ends `response.incomplete`)."""
    return json.dumps(
        {
            "ignore_eos": True,
            "min_tokens": cfg.osl,
            **json.loads(cfg.request_sampling),
        },
        separators=(",", ":"),
    )


def aiperf_point(
    cfg: ServerBenchConfig,
    bundle: Path,
    folder: Path,
    c: int,
    n: int,
    procs: tuple[int, int],
) -> float:
    """One AIPerf run into <folder>/aiperf_c<C> (`procs`: workers_max, record_processors); its
    output tok/s."""
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [
        "aiperf",
        "profile",
        "--model",
        "speed",
        "--tokenizer",
        str(bundle),
        "--url",
        f"http://127.0.0.1:{cfg.port}",
        "--endpoint-type",
        "responses",
        "--streaming",
        "--synthetic-input-tokens-mean",
        str(cfg.isl),
        "--synthetic-input-tokens-stddev",
        "0",
        "--output-tokens-mean",
        str(cfg.osl),
        "--output-tokens-stddev",
        "0",
        "--extra-inputs",
        extra_inputs(cfg),
        "--random-seed",
        "42",
        "--num-dataset-entries",
        "300",
        "--dataset-sampling-strategy",
        "sequential",
        "--concurrency",
        str(c),
        "--request-count",
        str(n),
        "--warmup-request-count",
        str(max(c, 8)),
        "--header",
        f"X-Qualflow-Phase:aiperf:c{c}",
        "--workers-max",
        str(procs[0]),
        "--record-processors",
        str(procs[1]),
        "--no-server-metrics",
        "--no-gpu-telemetry",
        "--ui-type",
        "none",
        "--export-level",
        "records",
        "--artifact-dir",
        str(folder / f"aiperf_c{c}"),
    ]
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    log = folder / f"aiperf_c{c}.log"
    with open(log, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    if rc:
        tail = "\n".join(log.read_text().splitlines()[-20:])
        raise RuntimeError(f"aiperf failed ({shlex.join(cmd[:3])} ... c{c}):\n{tail}")
    j = json.loads((folder / f"aiperf_c{c}" / "profile_export_aiperf.json").read_text())
    tps = j["output_token_throughput"]["avg"]
    print(f"{folder.name} c{c}: {tps:.0f} tok/s", flush=True)
    return tps
