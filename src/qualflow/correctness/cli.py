"""`qualflow correctness --bundle B --out C.parquet`: family correctness of a bundle, one row per
case and criterion; exits non-zero when a criterion fails. With --model-settings naming an
endpoint, endpoint correctness instead (qualflow.cli dispatches)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from qualflow.gpus import acquire
from qualflow.invocation import current_command

from .table import write_correctness


def add_correctness_args(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--bundle", help="our bundle (required unless --model-settings names an endpoint)"
    )
    s.add_argument(
        "--model-settings",
        help="the model's serving settings (qualflow model-settings): where they name an "
        "endpoint, endpoint correctness runs instead, on --pin",
    )
    s.add_argument("--pin", help="pin.json of the checkpoint an endpoint claims to serve")
    s.add_argument(
        "--startup-timeout",
        type=float,
        default=600.0,
        help="seconds a launched endpoint may take to become healthy",
    )
    s.add_argument("--out", required=True)
    s.add_argument("--device", default="cpu")
    s.add_argument(
        "--record-failures",
        action="store_true",
        help="write failed criteria (or a run that could not complete) to --out and exit 0",
    )


def _failure_row(error: BaseException, device: str):
    """A correctness run that could not complete, as one failed row: recorded evidence, not a
    crash."""
    import pandas as pd

    from .criteria import COLUMNS

    return pd.DataFrame(
        [
            {
                "case_id": "run/load",
                "prompt_id": None,
                "criterion": "run",
                "measured": float("nan"),
                "threshold": float("nan"),
                "passed": False,
                "detail": f"correctness did not run: {type(error).__name__}: {error}",
                "thresholds_version": None,
                "effective_precision": None,
                "device": device,
            }
        ]
    )[COLUMNS]


def _run(args: argparse.Namespace):
    if args.device.startswith("cuda") and os.environ.get("QUALFLOW_GPU_LEASE") != "off":
        with acquire(args.device, holder={"job": "correctness", "out": str(args.out)}) as lease:
            os.environ.update(lease.env())  # before CUDA starts: this job sees its GPU only
            return _correctness(args.bundle, "cuda")
    return _correctness(args.bundle, args.device)


def _correctness(bundle: str, device: str):
    from qualflow.runtime import EngineConfig, load_task

    from .criteria import run_correctness

    task = load_task(
        bundle, EngineConfig(device=device, max_batch=1, max_context=1024)
    )  # the prompts are short
    try:
        checkpoint_dir = task.manifest["checkpoint"]["path"]
        if not Path(checkpoint_dir).is_dir():
            raise FileNotFoundError(
                f"the reference needs the pinned checkpoint at {checkpoint_dir}; it is gone"
            )
        return run_correctness(task, checkpoint_dir)
    finally:
        task.close()


def main_correctness(args: argparse.Namespace) -> int:
    """Exit 1 when a criterion fails. With --record-failures a failed criterion, or a run that could
    not complete, is written to --out as evidence and the exit status is 0 (the status says why)."""
    t0 = time.perf_counter()
    try:
        df = _run(args)
    except Exception as e:  # noqa: BLE001 - with --record-failures every failure is evidence
        if not args.record_failures:
            raise
        df = _failure_row(e, args.device)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_correctness(df, args.out, current_command())
    failed = df[~df.passed]
    for r in df.itertuples():
        print(
            f"{'PASS' if r.passed else 'FAIL'}  {r.case_id:40s} {r.measured:<12.6g}"
            f" threshold {r.threshold:<10.6g} {r.detail}"
        )
    print(
        f"{len(df) - len(failed)}/{len(df)} criteria passed ({df.thresholds_version.iloc[0]}, "
        f"{df.effective_precision.iloc[0]} on {df.device.iloc[0]}) in "
        f"{time.perf_counter() - t0:.1f}s"
    )
    if len(failed):
        print(
            f"qualflow correctness: error: {len(failed)} criteria failed; see {args.out}",
            file=sys.stderr,
        )
        return 0 if args.record_failures else 1
    return 0
