"""`qualflow bench engine`: the native Task's speed on a GPU against each point's roofline, through
the engine variants of a plan, beside the last committed run of the same GPU model.

One run writes a Qwen3-0.6B-shaped checkpoint with seeded random weights (speed does not depend on
weight values), pins it, builds the fp16 bundle, then loads the plan's engine variants in turn
(variants.py): each load records its decode step's GPU time and kernels (decode_step.py) and its
greedy output against the plan's first variant (equality.py), then measures its points
(points.py: repeats of whole waves until --min-seconds and --min-repeats, the median with its
spread, its roofline (roofline.py) and its share of it). The variant of record also runs family
correctness and the offline workload; then (--engine-process on) its points again with the engine
in its own process, mixed steps (plan async), the multi-turn point (multiturn.py: the last turn's
TTFT with the prefix cache on and off), the agent-replay point (agent_replay.py: recorded agent
sessions, the prefix cache on and off), the plan's pairs alternated (--paired-rounds:
paired_points.py) and HF `generate` for two points. The run prints every
point against its roofline and the previous committed run, the A/B pairs and the variants
(report.py), writes <out>/<GPU model>/<date>-engine-<plan><suffix>.json in the results schema
(results.py), and exits 1 when a variant failed to load, differs from the baseline beyond a
near-tie, or (cuda) did not get the fused kernels or prefill graphs it asked for.

    qualflow bench engine --work /tmp/gpu --out benchmarks/results --plan v3 --skip-hf
    qualflow bench engine --tiny --work /tmp/gpu-smoke --out /tmp/gpu-smoke/results   # on cpu"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gc
import json
import re
import time
from pathlib import Path

import torch

from qualflow.configs import from_args
from qualflow.runtime import EngineConfig, load_task

from . import report, results
from .agent_replay import measure_agent_replay
from .config import EngineBenchConfig
from .constrained import measure_constrained, print_constrained
from .machine import correctness, device_figures, hf_points, machine, prepare_bundle
from .multiturn import measure_multiturn
from .paired_points import measure_paired_points
from .points import POINTS, measure
from .variant_load import first_load, load_figures, problems, variant_overrides
from .variants import ASYNC_POINTS, plan


def previous_figures(out: Path, gpu: str) -> dict:
    """The newest committed Task-level run (an engine result: points and copy bandwidth) of this GPU
    model in its folder of `out`, by its date, as this benchmark recorded it (the record's detail);
    the older tree's side of an A/B (a name ending in -old or -oldN) is not this code's past."""
    found = [
        r["detail"]
        for p, r in results.runs(out, gpu, "engine")
        if not re.search(r"-old\d*$", p.stem)
        and "points" in r["detail"]
        and "copy_bandwidth_tb_s" in r["detail"]
    ]
    return found[-1] if found else {}


class Run:
    """One run's record, where it is saved, and the engine its variants start from."""

    def __init__(self, cfg: EngineBenchConfig):
        self.cfg, self.t_start = cfg, time.perf_counter()
        self.device = torch.device("cpu" if cfg.tiny else "cuda")
        self.work = Path(cfg.work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.ckpt = prepare_bundle(self.work, cfg.shape)
        self.result = machine(self.device, "tiny" if cfg.tiny else "Qwen3-0.6B")
        self.result.update(device_figures(self.device, cfg.tiny))
        self.result.update(
            {"plan": cfg.plan, "async_scheduling": cfg.async_scheduling, "variants": {}}
        )
        out = Path(cfg.out) / results.gpu_dir(self.result["gpu"])
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / f"{dt.date.today().isoformat()}-engine-{cfg.plan}{cfg.suffix}.json"
        self.engine = EngineConfig(
            device=self.device.type,
            max_batch=8 if cfg.tiny else 256,
            max_context=2048 + 64,
            kv_cache_gb=cfg.kv_cache_gb,
            max_num_batched_tokens=cfg.max_num_batched_tokens,
            engine_process="off",
        )

    def save(self) -> None:
        r = self.result
        rec = results.record("engine", self.cfg.plan, r["gpu"], r["date"], r, r)
        self.path.write_text(json.dumps(rec, indent=1, default=float) + "\n")

    def late(self) -> bool:
        return time.perf_counter() - self.t_start > self.cfg.deadline_s

    def load(self, **overrides):
        return load_task(self.work / "bundle", dataclasses.replace(self.engine, **overrides))

    def release(self, task) -> None:
        task.close()
        del task
        gc.collect()  # the engine's reference cycles, so that its pool goes back before the next
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def run_variants(run: Run) -> list:
    cfg, result = run.cfg, run.result
    variants, _ = plan(cfg.plan, cfg.async_scheduling)
    default = (
        list(ASYNC_POINTS)
        if cfg.plan == "async" and cfg.async_scheduling == "ab"
        else [p[0] for p in POINTS]
    )
    base_probe = None
    for i, variant in enumerate(variants):
        try:
            task = run.load(**variant_overrides(variant, cfg.tiny))
        except Exception as e:  # noqa: BLE001 - record, go on with the next variant
            result["variants"][variant.tag] = {"error": f"load failed: {e!r}"}
            print(f"[{variant.tag}] load failed: {e!r}", flush=True)
            continue
        try:
            if i == 0 or "load_s" not in result:
                first_load(task, result, run.save)
            v, pr = load_figures(task, variant, cfg, base_probe)
            base_probe = base_probe if base_probe is not None or i > 0 else pr
            result["variants"][variant.tag] = v
            if variant.main and not cfg.skip_correctness:
                v["correctness"] = result["correctness"] = correctness(task, run.ckpt)
            run.save()
            names = cfg.points.split(",") if cfg.points else list(variant.points or default)
            measure(
                task,
                result,
                variant.tag,
                names[:1] if run.late() else names,
                run.save,
                cfg,
                offline=variant.main or variant.offline,
            )
            if variant.constrained:
                measure_constrained(task, result, cfg, run.save)
        except Exception as e:  # noqa: BLE001
            result["variants"].setdefault(variant.tag, {})["error"] = f"failed: {e!r}"
            print(f"[{variant.tag}] failed: {e!r}", flush=True)
        finally:
            run.release(task)
    return list(variants)


def measure_engine_process(run: Run) -> None:
    """The variant of record's points and offline workload with the engine in its own process (the
    Task's default on cuda: the caller's detokenizing and event delivery no longer share the
    engine's GIL). Its internals are out of reach there, so no probes and no preemption counts."""
    cfg, result = run.cfg, run.result
    variants, _ = plan(cfg.plan, cfg.async_scheduling)
    main = next((v for v in variants if v.main), variants[0])
    tag = main.tag + "_proc"
    try:
        task = run.load(**variant_overrides(main, cfg.tiny), engine_process="on")
    except Exception as e:  # noqa: BLE001 - record, the rest of the run stands
        result["variants"][tag] = {"error": f"load failed: {e!r}"}
        print(f"[{tag}] load failed: {e!r}", flush=True)
        return
    try:
        result["variants"][tag] = {
            "label": f"{main.label or main.tag}, engine process",
            "engine": {**main.engine, "engine_process": "on"},
            "task_info": task.info,
            "load_s": task.load_timing["load_s"],
            "graph_capture_s": task.load_timing.get("graph_capture_s"),
        }
        print(
            f"[{tag}] engine process: load {task.load_timing['load_s']:.1f}s  {task.info}",
            flush=True,
        )
        run.save()
        names = cfg.points.split(",") if cfg.points else [p[0] for p in POINTS]
        measure(task, result, tag, names, run.save, cfg, offline=True)
    finally:
        task.close()


def measure_mixed(run: Run) -> None:
    """Plan async: a load with mixed prefill + decode steps (Inductor's cache is warm now)."""
    task = run.load(mixed=True)
    r = run.result
    r["warm_load_s"], r["warm_graph_capture_s"] = (
        task.load_timing["load_s"],
        task.load_timing["graph_capture_s"],
    )
    print(
        f"warm start: load {r['warm_load_s']:.1f}s, compile + capture "
        f"{r['warm_graph_capture_s']:.1f}s",
        flush=True,
    )
    measure(task, r, "_mixed", ["c64_isl1024_osl256", "c256_isl128_osl128"], run.save, run.cfg)
    run.release(task)


def run_engine(cfg: EngineBenchConfig) -> int:
    cfg = cfg.resolved()
    run = Run(cfg)
    result = run.result
    prev = previous_figures(Path(cfg.prev or cfg.out), result["gpu"])
    variants = run_variants(run)
    if cfg.engine_process == "on" and not run.late():
        measure_engine_process(run)
    if cfg.plan == "async" and not cfg.skip_mixed and not run.late():
        measure_mixed(run)
    if not cfg.skip_multiturn and not run.late():
        measure_multiturn(run)
    if not cfg.skip_agent_replay and not run.late():
        measure_agent_replay(run)
    if cfg.paired_rounds and not run.late():
        measure_paired_points(run)
    if not cfg.skip_hf and not run.late():
        hf_points(run.ckpt, result, POINTS, run.save)
    result["summary"] = report.summary(result)
    result["problems"] = problems(result, variants, run.device.type == "cuda")
    report.print_points(result, prev)
    report.print_pairs(result, plan(cfg.plan, cfg.async_scheduling)[1])
    report.print_variants(result)
    report.print_device(result, prev)
    print_constrained(result, prev)
    run.save()
    print(f"wrote {run.path}")
    if result["problems"]:
        print(
            "\n"
            + "!" * 100
            + "\nRUN FAILED:\n  "
            + "\n  ".join(result["problems"])
            + "\n"
            + "!" * 100,
            flush=True,
        )
        return 1
    return 0


def main_bench_engine(args: argparse.Namespace) -> int:
    return run_engine(from_args(EngineBenchConfig, args))
