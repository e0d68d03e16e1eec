"""The prefill steps of chosen requests as a benchmark sees them: which path each ran (the model
runner's `path`: a captured graph, or eager) and its time on the host (building and launching it)
and on the device (CUDA events around its launch: with overlapped scheduling the device time starts
when the step before it ends, so a host-bound step counts its launch gaps too). Only an engine in
this process can be watched; one in its own process gives no steps."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter

import torch

from .point import run_point


class StepLog:
    def __init__(self, task, watch_all: bool = False):
        """`watch_all`: every prefill step, else those of the request ids in `watch`."""
        self.watch: set[str] = set()
        self.watch_all = watch_all
        self.steps: dict[str, list[dict]] = {}
        self.paths: Counter = Counter()
        runner = self.runner = getattr(getattr(task, "engine", None), "runner", None)
        if runner is None:
            return
        real = runner.run

        def run(batch, *args):
            ids = [s.req.request_id for s in batch.seqs]
            if batch.is_decode or not (watch_all or self.watch.intersection(ids)):
                return real(batch, *args)
            cuda = runner.device.type == "cuda"
            events = [torch.cuda.Event(enable_timing=True) for _ in range(2)] if cuda else None
            if cuda:
                events[0].record()
            t0 = time.perf_counter()
            out = real(batch, *args)
            host_ms = (time.perf_counter() - t0) * 1e3
            if cuda:
                events[1].record()
            rec = {"path": runner.path, "tokens": batch.num_tokens, "seqs": len(batch.seqs)}
            rec |= {"host_ms": host_ms, "events": events}
            self.paths[runner.path] += 1
            for i in ids:
                if watch_all or i in self.watch:
                    self.steps.setdefault(i, []).append(rec)
            return out

        runner.run = run

    def close(self) -> None:
        """Stop watching: the runner's own `run` again."""
        if self.runner is not None and "run" in vars(self.runner):
            del self.runner.run

    def of(self, request_id: str) -> list[dict]:
        """The request's prefill steps (after it finished): path, tokens, sequences, host_ms and
        device_ms (None off CUDA)."""
        out = []
        for rec in self.steps.get(request_id, []):
            ev = rec["events"]
            if ev is not None:
                ev[1].synchronize()
            dev = ev[0].elapsed_time(ev[1]) if ev is not None else None
            out.append({k: v for k, v in rec.items() if k != "events"} | {"device_ms": dev})
        return out


def step_summary(steps: list[dict]) -> dict:
    """The paths a set of steps ran and their median host and device times (ms)."""
    dev = [s["device_ms"] for s in steps if s["device_ms"] is not None]
    return {
        "paths": sorted({s["path"] for s in steps}),
        "host_ms_p50": statistics.median(s["host_ms"] for s in steps) if steps else None,
        "device_ms_p50": statistics.median(dev) if dev else None,
    }


def lone_prefills(task, isl: int, requests: int = 8) -> dict:
    """The prefill steps of `requests` one-at-a-time requests of `isl` random prompt tokens (2
    output tokens each; not part of any measured figure): their paths and median host and device
    times (step_summary). The part of a c1 point's TTFT that its prefill step is."""
    log = StepLog(task, watch_all=True)
    try:
        asyncio.run(run_point(task, 1, isl, 2, requests, seed=7))
        steps = [st for rid in list(log.steps) for st in log.of(rid)]
    finally:
        log.close()
    return step_summary(steps)
