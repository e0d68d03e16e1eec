"""The GPU cost of one decode step of a loaded in-process Task (cuda): the captured graph's replay
time at a few (batch, context) shapes, and the kernels of one step counted by torch.profiler, over
the replayed graph and over the same step run uncaptured on the same static buffers (the two counts
agree when the profiler sees a graph's kernels; the uncaptured one is there in case it does not).
The step's padding rows and real rows alike write their K/V to the scratch slot 0 here."""

from __future__ import annotations

import functools

import torch
from torch.profiler import ProfilerActivity, profile


def _fill(task, bs: int, ctx: int) -> None:
    """Every row of a `bs` batch at context `ctx`, over distinct pool blocks (never block 0)."""
    graphs = task.engine.runner.graphs
    nblk = -(-ctx // graphs.block_size)
    free = task.engine.scheduler.blocks.num_blocks - 1
    graphs.tables[:bs, :nblk] = (
        torch.arange(bs * nblk, device=graphs.device).view(bs, nblk) % free + 1
    ).to(torch.int32)
    graphs.lens[:bs] = ctx
    graphs.slots.zero_()


def _reset(task) -> None:
    graphs = task.engine.runner.graphs
    graphs.tables.zero_()
    graphs.lens.fill_(1)
    graphs.forget()


def _captured(task, shapes):
    """(key, batch, graph) of each (batch, context) of `shapes` the Task captured a decode graph
    for, its static buffers filled for that shape while the caller measures it, reset after."""
    graphs = task.engine.runner.graphs
    if graphs is None:
        return
    for bs, ctx in shapes:
        if bs not in graphs.graphs:
            continue
        _fill(task, bs, ctx)
        try:
            yield f"b{bs}_ctx{ctx}", bs, graphs.graphs[bs][0]
        finally:
            _reset(task)


def graph_replay_ms(task, shapes=((1, 256), (64, 256), (64, 1280), (256, 256))) -> dict:
    """ms per replay of the decode graph of each (batch, context), mean of 30 after one warm-up."""
    out = {}
    for key, _, g in _captured(task, shapes):
        s_, e_ = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        g.replay()
        s_.record()
        for _ in range(30):
            g.replay()
        e_.record()
        torch.cuda.synchronize()
        out[key] = s_.elapsed_time(e_) / 30
    return out


def _profiled(step, n: int = 5) -> dict:
    with torch.inference_mode():
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                step()
            torch.cuda.synchronize()
    ev = [e for e in prof.key_averages() if e.self_device_time_total > 0]
    top = sorted(ev, key=lambda e: -e.self_device_time_total)[:10]
    return {
        "kernels_per_step": sum(e.count for e in ev) / n,
        "kernel_us_per_step": sum(e.self_device_time_total for e in ev) / n,
        "top": [
            {
                "kernel": e.key[:80],
                "per_step": e.count / n,
                "us_per_step": e.self_device_time_total / n,
            }
            for e in top
        ],
    }


def decode_kernels(task, shapes=((1, 256), (64, 256))) -> dict:
    """Kernels per decode step and their summed GPU time, replayed and uncaptured, per (batch,
    ctx)."""
    graphs, out = task.engine.runner.graphs, {}
    for key, bs, g in _captured(task, shapes):
        try:
            out[key] = {
                "replay": _profiled(g.replay),
                "uncaptured": _profiled(functools.partial(graphs._run, bs)),
            }
        except Exception as e:  # noqa: BLE001 - a profiler that cannot run here: the figures are optional
            out[key] = {"error": repr(e)}
    return out
