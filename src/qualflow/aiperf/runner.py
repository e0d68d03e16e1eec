"""Run one pinned AIPerf point with a fixed environment, save the exact command, judge the
exports."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from qualflow.aiperf.command import AiperfPoint, build_command, command_to_str
from qualflow.aiperf.exports import INPUTS, judge_run
from qualflow.aiperf.options import AiperfOptions, ClientOptions
from qualflow.aiperf.record import PointRun
from qualflow.aiperf.sessions import render_inputs_json
from qualflow.files import sha256_file
from qualflow.lifetime import own_child

TMP_PREFIX = "qf-aiperf-"


# What AIPerf puts below the base: our dir (/qf-aiperf-<pid>-<8 random>), its own mkdtemp
# (/tmpXXXXXXXX) and its longest socket (/aiperf/dataset_manager_proxy_frontend.ipc): a base longer
# than SOCKET_PATH_MAX minus this (a TMPDIR of 27 characters already) breaks AIPerf's ZMQ start
SOCKET_TAIL, SOCKET_PATH_MAX = 84, 107


def _tmp_base() -> str:
    base = tempfile.gettempdir()
    return "/tmp" if len(base) + SOCKET_TAIL > SOCKET_PATH_MAX else base


def remove_stale_tmpdirs(base: str | None = None) -> list[Path]:
    """Private TMPDIRs whose owner (the pid in the name) is gone: a session that was SIGKILLed never
    ran its cleanup. Removed; returns what was removed."""
    gone = []
    for d in Path(base or _tmp_base()).glob(f"{TMP_PREFIX}*-*"):
        pid = d.name[len(TMP_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
    return gone


def private_tmpdir() -> Path:
    """A fresh, SHORT temp dir named for this process: AIPerf puts its ZMQ IPC sockets under TMPDIR,
    and a unix socket path must stay under 107 bytes, so it can never live inside a (deep) results
    directory."""
    remove_stale_tmpdirs()
    return Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", dir=_tmp_base()))


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# Set for every AIPerf run (and recorded with its command): the tokenizer is a local directory (the
# bundle's, or the pin's), so the parent's cache pre-warm has nothing to fetch; it would only load
# the tokenizer once more in a spawned process (about 2.5 CPU-s a run on a 2-core machine). Each
# service still loads the tokenizer itself.
FIXED_ENV = {"AIPERF_TOKENIZER_SKIP_PRELOAD": "true"}


def aiperf_env(tmpdir: Path) -> dict:
    """AIPerf's environment: HF_HUB_OFFLINE unset (a local tokenizer dir fails under it in 0.13.0),
    a private TMPDIR per run (AIPerf leaves mmap/tmp dirs there), no colour, FIXED_ENV."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    }
    env.update(
        {
            "TMPDIR": str(tmpdir),
            "NO_COLOR": "1",
            "PYTHONUNBUFFERED": "1",
            "TOKENIZERS_PARALLELISM": "false",
            **FIXED_ENV,
        }
    )
    return env


class Progress:
    """Progress lines of a long AIPerf run: requests done against expected, elapsed, ETA."""

    def __init__(self, label: str, expected: int, start: float, every_s: float):
        self.label, self.expected, self.start, self.every_s = label, expected, start, every_s
        self.last = start

    def line(self, done: int, now: float) -> str:
        elapsed = now - self.start
        eta = f"{elapsed / done * (self.expected - done):.0f}s" if 0 < done < self.expected else "-"
        return (
            f"progress {self.label}: {done}/{self.expected} requests, "
            f"elapsed {elapsed:.0f}s, ETA {eta}"
        )

    def tick(self, done_fn, now: float | None = None) -> str | None:
        now = time.monotonic() if now is None else now
        if now - self.last < self.every_s:
            return None
        self.last = now
        text = self.line(min(int(done_fn()), self.expected), now)
        print(text, flush=True)
        return text


def _start(cmd: list[str], tmpdir: Path, log_path: Path) -> tuple[subprocess.Popen, object]:
    """AIPerf in its own process group (all of its services), which dies with this process
    (PDEATHSIG), SIGINT at its default whatever this process inherited (lifetime.own_child)."""
    out = open(log_path, "w")
    proc = subprocess.Popen(
        cmd,
        env=aiperf_env(tmpdir),
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=own_child,
    )
    return proc, out


def _wait(
    proc: subprocess.Popen,
    point: AiperfPoint,
    options: AiperfOptions,
    alive_check,
    progress,
    label: str | None,
) -> int:
    """AIPerf's exit code; `alive_check()` and a progress line every `progress_every_s`
    meanwhile."""
    rc = None
    start = time.monotonic()
    deadline = start + options.timeout_s
    report = Progress(
        label or point.point_id,
        point.request_count + point.warmup_request_count,
        start,
        options.progress_every_s,
    )
    while rc is None:
        try:
            rc = proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            if alive_check is not None:
                alive_check()
            if progress is not None:
                report.tick(progress)
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"AIPerf point {point.point_id} ran past {options.timeout_s:.0f}s"
                ) from None
    return rc


# How long a SIGINTed AIPerf may take to stop gracefully (it still exports what it measured), before
# its group is killed. With no request done there is nothing to export, and AIPerf 0.13.0 cancelled
# while still configuring its services hangs for about 30 s after logging "No profile results to
# export" (its event loop waits for a tokenizer-loading thread), so that case gets a short grace.
EXPORT_GRACE_S = 30.0
NOTHING_DONE_GRACE_S = 2.0


def stop_grace_s(done: int | None) -> float:
    """The graceful-stop wait for an AIPerf run with `done` requests finished (None: not
    counted)."""
    return NOTHING_DONE_GRACE_S if done == 0 else EXPORT_GRACE_S


def _stop(proc: subprocess.Popen, grace_s: float) -> None:
    if proc.poll() is None:
        # Only SIGINT is graceful for AIPerf (it still exports), then the whole group goes.
        _signal_group(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
    _signal_group(proc.pid, signal.SIGKILL)  # services AIPerf left behind in its group


def run_point(
    point: AiperfPoint,
    client: ClientOptions,
    *,
    point_dir: str | Path,
    phase_header: str | None = None,
    options: AiperfOptions | None = None,
    alive_check=None,
    progress=None,
    label: str | None = None,
) -> PointRun:
    """Run AIPerf for `point` into `point_dir/aiperf`; returns the run record (also written to
    `point_dir/run.json`). `alive_check()` is polled while AIPerf runs and may raise to abort it.
    `progress()` returns the requests done so far (warm-up included); every `progress_every_s` a
    line with done/expected, elapsed time and ETA goes to stdout (the session log)."""
    options = AiperfOptions() if options is None else options
    point_dir = Path(point_dir)
    artifact_dir = point_dir / "aiperf"
    if artifact_dir.exists():
        shutil.rmtree(artifact_dir)  # AIPerf overwrites files in place; never mix two runs
    point_dir.mkdir(parents=True, exist_ok=True)
    tmpdir = private_tmpdir()
    sent = point
    if point.inputs_json is not None:  # the committed file, with this run's model and limits set
        rendered = render_inputs_json(point, client.model_name, point_dir / "inputs_json.json")
        sent = replace(point, inputs_json=str(rendered))
    cmd = build_command(
        sent, client, artifact_dir=str(artifact_dir), phase_header=phase_header, options=options
    )
    if shutil.which(options.aiperf_bin) is None:
        raise FileNotFoundError(
            "the `aiperf` executable is not on PATH (pip install aiperf==0.13.0)"
        )
    shown = [
        ("<api key from the environment>" if client.api_key and a == client.api_key else a)
        for a in cmd
    ]
    record = PointRun(
        point=point,
        argv=shown,
        input_file_sha256=sha256_file(point.input_file or point.inputs_json)
        if (point.input_file or point.inputs_json)
        else None,
        command=command_to_str(shown),
        env={"HF_HUB_OFFLINE": "<unset>", "TMPDIR": str(tmpdir), **FIXED_ENV},
        started_ns=time.time_ns(),
    )
    (point_dir / "command.sh").write_text(
        "# exact AIPerf command run by qualflow (env: HF_HUB_OFFLINE unset, TMPDIR private, "
        + " ".join(f"{k}={v}" for k, v in FIXED_ENV.items())
        + ")\n"
        + record.command
        + "\n"
    )
    proc, out = _start(cmd, tmpdir, point_dir / "aiperf.log")
    rc = None
    try:
        rc = _wait(proc, point, options, alive_check, progress, label)
    finally:
        _stop(
            proc,
            stop_grace_s(None if progress is None or proc.poll() is not None else int(progress())),
        )
        out.close()
        shutil.rmtree(tmpdir, ignore_errors=True)
    record.ended_ns = time.time_ns()
    record.exit_code = rc
    if sent is not point and artifact_dir.is_dir() and not (artifact_dir / INPUTS).exists():
        # AIPerf writes no inputs.json for a verbatim replay: the payloads it sent are the file
        shutil.copyfile(sent.inputs_json, artifact_dir / INPUTS)
    record.verdict = judge_run(
        artifact_dir,
        expected_requests=point.request_count,
        expected_warmup=point.warmup_request_count,
        expected_seed=point.seed,
        exit_code=rc,
    )
    record.dataset_sha256 = record.verdict.dataset_sha256
    record.write(point_dir / "run.json")
    return record
