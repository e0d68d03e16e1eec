"""What an engine benchmark run prints and stores as its summary: every point against its
roofline and the previous committed run, the A/B pairs of its plan, and the decode-step figures
of each variant. `summary(result)` is the run-level table stored in the JSON
(`result["summary"]`), one row per point, in the units of docs/performance.md's tables."""

from __future__ import annotations

NAN = float("nan")


# The engine settings a point's figures depend on, as its variant's task_info reports them
# (effective, not asked)
ENGINE_KEYS = (
    "device",
    "effective_precision",
    "cuda_graphs",
    "compiled_ops",
    "async_scheduling",
    "mixed_batches",
    "varlen_attention",
    "fused_kernels",
    "prefill_graphs",
)


def _engine(run: dict, tag: str) -> dict | None:
    info = run.get("variants", {}).get(tag, {}).get("task_info")
    if info is None:
        return None
    return {
        **{k: info.get(k) for k in ENGINE_KEYS},
        "engine_process": info.get("engine_pid") is not None,
    }


def _prev_point(prev: dict, key: str, tag: str, engine: dict | None = None) -> tuple[str, dict]:
    """The previous run's figures for a point key, and the key they were stored under: the same
    key; else the same point under a previous variant that ran the same engine (`engine`: this
    variant's `_engine`), whatever that variant was called; else the point overlapped, plain, or
    under the previous run's last variant. ("", {}) where the previous run did not measure the
    point."""
    points = prev.get("points", {})
    name = key[: -len(tag)] if tag and key.endswith(tag) else key
    variants = list(prev.get("variants", {}))
    same = [v for v in variants if engine is not None and _engine(prev, v) == engine]
    for k in (
        key,
        *(name + v for v in same),
        name + "_async",
        name,
        *(name + v for v in reversed(variants)),
    ):
        if k in points:
            return k, points[k]
    return "", {}


def summary(result: dict) -> list[dict]:
    rows = []
    for key, r in result["points"].items():
        if "error" in r:
            rows.append({"point": key, "error": r["error"]})
            continue
        rows.append(
            {
                "point": key,
                "variant": r.get("variant", ""),
                "output_tok_per_s": r["output_tok_per_s"],
                "output_tok_per_s_min": r["output_tok_per_s_min"],
                "output_tok_per_s_max": r["output_tok_per_s_max"],
                "roofline_tok_per_s": r["roofline"]["limit_tok_per_s"],
                "pct_of_roofline": r["pct_of_roofline"],
                "pct_of_decode_roofline": r["pct_of_decode_roofline"],
                "ttft_ms_p50": r["ttft_ms_p50"],
                "itl_ms_p50": r["itl_ms_p50"],
                "met": r["met"],
            }
        )
    return rows


def print_points(result: dict, prev: dict) -> None:
    print(f"\nprevious: {prev.get('date', 'none')} {prev.get('gpu', '')}")
    print(
        "| point | tok/s (median) | [min, max] | previous tok/s | roofline tok/s | % of roofline | "
        "% of decode roofline | TTFT p50 ms (prev) | ITL p50 ms (prev) | HF tok/s | target met |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key, r in result["points"].items():
        if "error" in r:
            print(f"| {key} | error: {r['error'][:80]} | | | | | | | | | |")
            continue
        tag = r.get("variant", "")
        pkey, p = _prev_point(prev, key, tag, _engine(result, tag))
        was = f" ({pkey})" if pkey and pkey != key else ""
        print(
            f"| {key} | {r['output_tok_per_s']:.0f} | [{r['output_tok_per_s_min']:.0f}, "
            f"{r['output_tok_per_s_max']:.0f}] | {p.get('output_tok_per_s', NAN):.0f}{was} | "
            f"{r['roofline']['limit_tok_per_s']:.0f} | {r['pct_of_roofline']:.1f} | "
            f"{r['pct_of_decode_roofline']:.1f} | {r['ttft_ms_p50']:.2f} "
            f"({p.get('ttft_ms_p50', NAN):.2f}) | {r['itl_ms_p50']:.3f} "
            f"({p.get('itl_ms_p50', NAN):.3f}) | {r.get('hf_output_tok_per_s', NAN):.0f} | "
            f"{r['met']} |"
        )
    for tag in [k for k in result if k.startswith("offline")]:
        if "error" not in result[tag]:
            same = prev.get(tag) or next((prev[k] for k in prev if k.startswith("offline")), {})
            po, off = same.get("output_tok_per_s", NAN), result[tag]
            limit = off.get("roofline", {}).get("limit_tok_per_s", NAN)
            dec = off.get("roofline", {}).get("decode_limit_tok_per_s", NAN)
            print(
                f"| {tag} (nano-vllm bench) | {off['output_tok_per_s']:.0f} | | {po:.0f} | "
                f"{limit:.0f} | {off.get('pct_of_roofline', NAN):.1f} | "
                f"{100 * off['output_tok_per_s'] / dec:.1f} | | | | {off.get('met')} |"
            )


def print_pairs(result: dict, pairs) -> None:
    """Each A/B pair over the points both variants measured: B/A tok/s, TTFT and ITL A -> B."""
    if not pairs:
        return
    print(
        "\n| A/B | point | tok/s A -> B | B/A | TTFT p50 ms A -> B | ITL p50 ms A -> B | % "
        "roofline A -> B |"
    )
    print("|---|---|---|---|---|---|---|")
    pts = result["points"]
    for a, b, label in pairs:
        for key, ra in pts.items():
            if not key.endswith(a) or "error" in ra or (a == "" and key.endswith(b)):
                continue
            name = key[: len(key) - len(a)] if a else key
            rb = pts.get(name + b)
            if not rb or "error" in rb or ra.get("variant", "") != a:
                continue
            print(
                f"| {label} | {name} | {ra['output_tok_per_s']:.0f} -> "
                f"{rb['output_tok_per_s']:.0f} | "
                f"{rb['output_tok_per_s'] / ra['output_tok_per_s']:.2f} | {ra['ttft_ms_p50']:.2f} "
                f"-> {rb['ttft_ms_p50']:.2f} | {ra['itl_ms_p50']:.3f} -> {rb['itl_ms_p50']:.3f} | "
                f"{ra['pct_of_roofline']:.1f} -> {rb['pct_of_roofline']:.1f} |"
            )


def floor_ratio(result: dict, replay_ms: dict) -> float:
    """The b1 decode step's GPU time over its weight-read floor (NAN where either is missing)."""
    floor, step = result.get("weight_read_floor_ms"), replay_ms.get("b1_ctx256")
    return step / floor if floor and step else NAN


def print_variants(result: dict) -> None:
    """Per variant: what ran the layers, prefill graphs, load, decode GPU ms/step and the b1 step
    over the weight-read floor (the run's weight bytes at its copy bandwidth), kernels/step,
    equality."""
    if not result.get("variants"):
        return
    print(
        "\n| variant | fused kernels; varlen attention | prefill graphs | load + capture s | "
        "b1 replay ms (x floor) | b64 replay ms | b1 kernels/step (replay, uncaptured) | "
        "b1 kernel us/step | equality with the baseline |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for tag, v in result["variants"].items():
        if "error" in v:
            print(f"| {tag} | error: {v['error'][:100]} | | | | | | | |")
            continue
        info, rep, k = (
            v.get("task_info", {}),
            v.get("graph_replay_ms", {}),
            v.get("decode_kernels", {}).get("b1_ctx256", {}),
        )
        kr, ku = k.get("replay", {}), k.get("uncaptured", {})
        eq = v.get("equality")
        eqs = (
            "baseline"
            if eq is None
            else (
                f"{'PASS' if eq['passed'] else 'FAIL'} (tokens equal {eq['tokens_equal']}, "
                f"rel {eq['max_rel_logit_diff']:.2e}, {len(eq['divergences'])} divergences)"
            )
        )
        pg = info.get("prefill_graphs")
        pdl = " + programmatic launch" if info.get("programmatic_launch") == "on" else ""
        print(
            f"| {tag} | {info.get('fused_kernels')}{pdl}; {info.get('varlen_attention')} | "
            f"{len(pg) if pg else 0} buckets | "
            f"{v.get('load_s', NAN):.1f} + {v.get('graph_capture_s', NAN):.1f} | "
            f"{rep.get('b1_ctx256', NAN):.3f} ({floor_ratio(result, rep):.2f}x) | "
            f"{rep.get('b64_ctx256', NAN):.3f} | "
            f"{kr.get('kernels_per_step', NAN):.0f}, {ku.get('kernels_per_step', NAN):.0f} | "
            f"{kr.get('kernel_us_per_step', NAN):.0f} | {eqs} |"
        )


def print_device(result: dict, prev: dict) -> None:
    print(
        f"copy bandwidth {result['copy_bandwidth_tb_s']:.3f} TB/s (previous "
        f"{prev.get('copy_bandwidth_tb_s', NAN):.2f}); matmul {result['matmul_tflops']:.1f} "
        f"TFLOP/s; weight-read floor {result.get('weight_read_floor_ms', NAN):.3f} ms/step; load "
        f"{result.get('load_s', NAN):.1f}s + compile/capture "
        f"{result.get('graph_capture_s', NAN):.1f}s (previous {prev.get('load_s', NAN):.1f} + "
        f"{prev.get('graph_capture_s', NAN):.1f})"
    )
