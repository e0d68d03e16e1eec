"""`qualflow bench engine --plan tools` (issue 46): what constrained decoding costs, through the
Task, on the loaded variant, each figure's sides alternated in rounds in the same call.

  tools_vs_none   the pilot shape (c64, ISL 1024, OSL 256, ignore_eos): every request constrained
                  to `tool_choice: required` over the pilot's strict functions ("required"), and to
                  one strict function with a free string argument ("free": every token masked),
                  against the same requests unconstrained; output tok/s ratio (target >= 0.90 for
                  required).
  mixed_batch     c32 unconstrained requests beside c32 others, the others unconstrained (base) or
                  constrained (required): the first group's ITL p50, % slower (target <= 3 %). The
                  batch is 64 rows on both sides, so the difference is the grammar's alone.
  schema_latency  c1 requests back to back: unconstrained, a new schema (a function name not seen
                  before: a compile), the same schema again (cached); the TTFT each adds to the
                  unconstrained one, p50 (targets <= 50 ms / <= 1 ms).
On --tiny the shapes scale down (c <= 4, ISL <= 32, OSL <= 16) and the figures mean nothing."""

from __future__ import annotations

import asyncio
import math
import statistics

from . import paired
from .constrained_load import (
    WEATHER,
    GrammarBreaks,
    Group,
    first_token_ms,
    free_call,
    one_tool,
    required,
    run_groups,
)
from .points import scaled

PILOT = (64, 1024, 256)  # concurrency, ISL, OSL of the pilot's chat-1k-256 c64 point
LATENCY = (128, 4)  # ISL, OSL of the schema latency requests
LATENCY_SAMPLES = 20
TARGETS = {"required_ratio": 0.90, "mixed_slower_pct": 3.0, "new_ms": 50.0, "cached_ms": 1.0}


def shape(tiny: bool) -> tuple[int, int, int]:
    return scaled(*PILOT, tiny)


def rounds_for(calib_s: float, min_s: float, min_repeats: int) -> tuple[int, int]:
    """(waves per side a round, rounds): each side measures at least `min_s` over at least
    `min_repeats` rounds, a wave lasting `calib_s`."""
    waves = max(1, math.ceil(min_s / min_repeats / max(calib_s, 1e-6)))
    return waves, max(min_repeats, math.ceil(min_s / (waves * max(calib_s, 1e-6))))


def _groups_round(task, groups: list[Group], isl: int, osl: int, seed: int) -> dict:
    return asyncio.run(run_groups(task, groups, isl, osl, seed))


def _seed(round_: int, side: int) -> int:
    """The prompts' seed of one side of a round: every side of every round gets its own prompts,
    so none is served from the prefix cache that an earlier side filled."""
    return 100 * (round_ + 1) + side


def tools_vs_none(task, cfg) -> dict:
    c, isl, osl = shape(cfg.tiny)
    calib = _groups_round(task, [Group("calib", c, c)], isl, osl, 0)["calib"]["wall_s"]
    waves, rounds = rounds_for(calib, cfg.min_seconds, cfg.min_repeats)
    sides = {"none": None, "required": required(), "free": free_call()}
    warm = [Group(f"warm-{k}", 1, 1, g) for k, g in sides.items() if g is not None]
    _groups_round(task, warm, isl, osl, 1)  # the compiler built, both grammars compiled
    tps: dict[str, list[float]] = {k: [] for k in sides}
    with GrammarBreaks() as breaks:
        for n in range(rounds):
            order = list(sides) if n % 2 == 0 else list(sides)[::-1]
            for name in order:
                g = Group(name, c, c * waves, sides[name])
                seed = _seed(n, list(sides).index(name))  # prompts of its own: no prefix hits
                tps[name].append(_groups_round(task, [g], isl, osl, seed)[name]["output_tok_per_s"])
    out = {"concurrency": c, "isl": isl, "osl": osl, "requests": c * waves, "breaks": breaks.count}
    out["required"] = paired.judged(
        paired.paired(tps["none"], tps["required"]), "ratio", at_least=TARGETS["required_ratio"]
    )
    out["free"] = paired.paired(tps["none"], tps["free"])
    return out


def mixed_batch(task, cfg) -> dict:
    c, isl, osl = shape(cfg.tiny)
    half = max(1, c // 2)
    calib = _groups_round(task, [Group("a", half, half), Group("b", half, half)], isl, osl, 0)
    waves, rounds = rounds_for(calib["a"]["wall_s"], cfg.min_seconds, cfg.min_repeats)
    itl: dict[str, list[float]] = {"base": [], "shared": []}
    rate: dict[str, list[float]] = {"base": [], "shared": []}
    with GrammarBreaks() as breaks:
        for n in range(rounds):
            for side in ("base", "shared") if n % 2 == 0 else ("shared", "base"):
                other = required() if side == "shared" else None
                groups = [
                    Group("plain", half, half * waves),
                    Group("other", half, half * waves, other),
                ]
                figs = _groups_round(task, groups, isl, osl, _seed(n, side == "shared"))["plain"]
                itl[side].append(figs["itl_ms_p50"])
                rate[side].append(figs["request_tok_per_s_p50"])
    out = paired.judged(
        paired.slowdown_pct(itl["base"], itl["shared"]),
        "slower_pct",
        at_most=TARGETS["mixed_slower_pct"],
    )
    return {
        **out,
        "concurrency": f"{half}+{half}",
        "isl": isl,
        "osl": osl,
        "request_tok_per_s": paired.paired(rate["base"], rate["shared"]),
        "breaks": breaks.count,
    }


def schema_latency(task, cfg) -> dict:
    isl, osl = (min(LATENCY[0], 32), LATENCY[1]) if cfg.tiny else LATENCY
    n = min(LATENCY_SAMPLES, 5) if cfg.tiny else LATENCY_SAMPLES
    run = lambda g, s: asyncio.run(first_token_ms(task, g, isl, osl, s))  # noqa: E731
    run(free_call("warm"), 0)  # the compiler is built, its first schema compiled
    plain, new, cached = [], [], []
    for i in range(n):  # each request its own prompt: none is served from the prefix cache
        plain.append(run(None, 3 * i + 1))
        new.append(run(one_tool(f"fn_{i}", WEATHER), 3 * i + 2))
        cached.append(run(one_tool(f"fn_{i}", WEATHER), 3 * i + 3))
    return {
        "isl": isl,
        "osl": osl,
        "ttft_ms_p50": statistics.median(plain),
        "new": paired.judged(
            paired.added_ms(plain, new), "added_ms_p50", at_most=TARGETS["new_ms"]
        ),
        "cached": paired.judged(
            paired.added_ms(plain, cached), "added_ms_p50", at_most=TARGETS["cached_ms"]
        ),
    }


FIGURES = (
    ("tools_vs_none", tools_vs_none),
    ("mixed_batch", mixed_batch),
    ("schema_latency", schema_latency),
)


def measure_constrained(task, result: dict, cfg, save) -> None:
    """The three figures into result["constrained"] (saved after each; an error is recorded and
    the next figure runs)."""
    rec = result.setdefault("constrained", {})
    for name, figure in FIGURES:
        try:
            rec[name] = figure(task, cfg)
        except Exception as e:  # noqa: BLE001 - record, go on with the next figure
            rec[name] = {"error": repr(e)}
            print(f"constrained {name} failed: {e!r}", flush=True)
        save()


def rows(rec: dict) -> list[tuple[str, float | None, str, bool | None]]:
    """The figures as (label, value, unit and target, met) rows (None where a figure failed)."""
    t, m, s = (rec.get(k, {}) for k in ("tools_vs_none", "mixed_batch", "schema_latency"))
    get = lambda d, *ks: _dig(d, ks)  # noqa: E731
    return [
        (
            "required / none tok/s",
            get(t, "required", "ratio"),
            ">= 0.90",
            get(t, "required", "met"),
        ),
        ("free string / none tok/s", get(t, "free", "ratio"), "(worst case)", None),
        ("shared batch ITL p50 slower", get(m, "slower_pct"), "% <= 3", get(m, "met")),
        (
            "new schema added TTFT p50",
            get(s, "new", "added_ms_p50"),
            "ms <= 50",
            get(s, "new", "met"),
        ),
        (
            "cached schema added TTFT p50",
            get(s, "cached", "added_ms_p50"),
            "ms <= 1",
            get(s, "cached", "met"),
        ),
    ]


def _dig(d: dict, keys) -> object:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def print_constrained(result: dict, prev: dict) -> None:
    """The figures beside the previous committed run's (same GPU model), where it has them."""
    rec = result.get("constrained")
    if not rec:
        return
    before = {label: v for label, v, _, _ in rows(prev.get("constrained", {}))}
    t = rec.get("tools_vs_none", {})
    print(
        f"\nconstrained decoding (c{t.get('concurrency')} ISL {t.get('isl')} OSL {t.get('osl')}; "
        f"grammar breaks {t.get('breaks')}/{rec.get('mixed_batch', {}).get('breaks')}):"
    )
    print(f"  {'figure':<30}{'now':>10}{'previous':>10}  target     met")
    for label, v, target, met in rows(rec):
        p = before.get(label)
        print(
            f"  {label:<30}{_fmt(v):>10}{_fmt(p):>10}  {target:<13} {'-' if met is None else met}"
        )
    for name, r in rec.items():
        if "error" in r:
            print(f"  {name}: {r['error']}")


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"
