"""One engine variant's load in the engine benchmark: the engine settings it asks for, what its
first load records for the run, its decode-step figures and greedy probe, and what makes the run
fail loudly."""

from __future__ import annotations

from . import decode_step, equality
from .roofline import model_shape


def variant_overrides(variant, tiny: bool) -> dict:
    """A variant's engine settings; on cpu (--tiny) prefill graphs `auto` become `on`: the padded
    step, run eagerly."""
    overrides = dict(variant.engine)
    if tiny and overrides.get("prefill_graphs") == "auto":
        overrides["prefill_graphs"] = "on"
    return overrides


def first_load(task, result: dict, save) -> None:
    """What the first Task of the run records: load times, shape and the weight-read floor."""
    result["load_s"], result["graph_capture_s"] = (
        task.load_timing["load_s"],
        task.load_timing["graph_capture_s"],
    )
    result["task_info"] = task.info
    shape = model_shape(task)
    result["shape"], result["params"] = shape, shape["params"]
    result["weight_read_floor_ms"] = (
        shape["weight_bytes"] / (result["copy_bandwidth_tb_s"] * 1e12) * 1e3
    )
    save()


def load_figures(task, variant, cfg, base_probe: dict | None) -> tuple[dict, dict | None]:
    """One variant's load: its info, timings, decode-step figures and its greedy probe (compared
    with the baseline's when there is one). Returns (figures, probe)."""
    v = {
        "label": variant.label,
        "engine": variant.engine,
        "task_info": task.info,
        "load_s": task.load_timing["load_s"],
        "graph_capture_s": task.load_timing["graph_capture_s"],
    }
    print(
        f"[{variant.tag or 'plain'}] {variant.label}: load {v['load_s']:.1f}s, compile + capture "
        f"{v['graph_capture_s']:.1f}s  {task.info}",
        flush=True,
    )
    if task.device.type == "cuda":
        v["graph_replay_ms"] = decode_step.graph_replay_ms(task)
        v["decode_kernels"] = decode_step.decode_kernels(task)
        k = v["decode_kernels"].get("b1_ctx256", {})
        print(
            f"  graph replay ms/step {v['graph_replay_ms']}; b1 kernels/step replay "
            f"{k.get('replay', {}).get('kernels_per_step')}, uncaptured "
            f"{k.get('uncaptured', {}).get('kernels_per_step')}",
            flush=True,
        )
    pr = None
    if not cfg.skip_equality:
        pr = equality.probe(task, base_probe, tiny=cfg.tiny)
        if base_probe is not None:
            precision = "float32" if task.device.type == "cpu" else "float16"
            v["equality"] = equality.compare(base_probe, pr, precision)
            print(f"  equality with the baseline: {v['equality']}", flush=True)
    return v, pr


def problems(result: dict, variants, cuda: bool) -> list[str]:
    """What makes the run fail loudly: a variant that did not load or measure, output that differs
    from the baseline beyond a near-tie, fused kernels, prefill graphs, programmatic launch,
    cuDNN attention, the one-row GEMV or the RMSNorm in it asked for and not got (cuda)."""
    out = []
    for variant in variants:
        v = result["variants"].get(variant.tag, {})
        if "error" in v:
            out.append(f"{variant.tag}: {v['error']}")
            continue
        if v.get("equality") and not v["equality"]["passed"]:
            out.append(
                f"{variant.tag}: greedy output differs from {variants[0].tag} beyond a "
                f"near-tie: {v['equality']}"
            )
        if cuda:
            out += _not_got(variant, v.get("task_info", {}))
    out += [f"{k}: {r['error']}" for k, r in result["points"].items() if "error" in r]
    return out


def _not_got(variant, info: dict) -> list[str]:
    asked, out = variant.engine, []
    if asked.get("fused_kernels") and info.get("fused_kernels") != "triton":
        out.append(f"{variant.tag}: fused kernels asked for, got {info.get('fused_kernels')!r}")
    if asked.get("prefill_graphs") == "auto" and not info.get("prefill_graphs"):
        out.append(f"{variant.tag}: prefill graphs asked for, none captured")
    if asked.get("varlen_attention") == "cudnn" and not str(
        info.get("varlen_attention")
    ).startswith("cudnn"):
        out.append(
            f"{variant.tag}: cuDNN attention asked for, got {info.get('varlen_attention')!r}"
        )
    if asked.get("varlen_attention") == "extend" and not str(info.get("extend_attention")).endswith(
        "+fresh"
    ):
        out.append(
            f"{variant.tag}: the extend kernel for fresh steps asked for, got "
            f"{info.get('extend_attention')!r}"
        )
    if asked.get("one_row_gemv") and info.get("one_row_gemv") is not True:
        out.append(f"{variant.tag}: the one-row GEMV asked for, got {info.get('one_row_gemv')!r}")
    if asked.get("norm_gemv") and info.get("norm_gemv") is not True:
        out.append(
            f"{variant.tag}: the RMSNorm in the GEMV asked for, got {info.get('norm_gemv')!r}"
        )
    if asked.get("rope_in_attention") and info.get("rope_in_attention") is not True:
        out.append(
            f"{variant.tag}: q/k-norm + RoPE inside attention asked for, got "
            f"{info.get('rope_in_attention')!r}"
        )
    if asked.get("solo_prefill_attention") == "cudnn" and (
        not str(info.get("solo_prefill_attention")).startswith("cudnn")
        or info.get("solo_prefill_graphs") != "captured"
    ):
        out.append(
            f"{variant.tag}: cuDNN's dense SDPA for a lone prompt asked for, got "
            f"{info.get('solo_prefill_attention')!r}, graphs {info.get('solo_prefill_graphs')!r}"
        )
    if asked.get("programmatic_launch") and info.get("programmatic_launch") != "on":
        out.append(
            f"{variant.tag}: programmatic launch asked for, got {info.get('programmatic_launch')!r}"
        )
    return out
