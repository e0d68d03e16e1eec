"""The engine variants one `qualflow bench engine` run loads in turn, each on the same bundle, and
the A/B pairs its report compares. A variant is EngineConfig overrides, the key suffix of its points
and the points it measures; the first variant of a plan is the baseline the others' greedy output is
checked against (equality.py).

  --plan v3 (issue 22): overlap on throughout;
    _base       the compiled layer halves, no prefill graphs, alternating steps (before v3)
    _fused      + the fused layer kernels                          (kernels per step, b1 ITL)
    _v3         + prefill graphs for fresh steps (the v3 defaults) (TTFT)
    _v3_mixed   + mixed prefill + decode steps                     (against alternating)
  --plan async (the --async-scheduling off/on/ab runs): one step at a time "" and overlapped
    "_async".
  --plan wait (issues 21, 22): overlapped, a prefill step whenever a prompt waits and the last step
    decoded ("_w0", prefill_wait_factor 0, before) against prompts that wait until their summed wait
    reaches the decoding requests ("_w1", 1.0, the default); each with the offline workload, whose
    prompts are admitted as batch slots free up.
  --plan skinny (issues 22, 49): overlapped; torch's GEMM for every projection ("_cublas") against
    the skinny GEMM for steps of up to 16 rows ("_skinny", the default), and that with one-row
    steps through the one-row GEMV ("_gemv"); the offline workload on each.
  --plan pdl (issue 22): overlapped; every Triton kernel waiting for the one before it ("_nopdl",
    --no-programmatic-launch) against programmatic dependent launch ("_pdl", the default); the
    offline workload on both.
  --plan budget (issue 22): overlapped; the prefill token budget (max_num_batched_tokens) at 8192
    ("_b8k", the default), 4096 ("_b4k") and 16384 ("_b16k"): the pilot shape's and the offline
    workload's prefill steps, fewer and larger or more and smaller; the offline workload on each.
  --plan rows (issue 22): overlapped; the skinny GEMM for steps of up to 16 rows ("_r16", the
    default) against up to 64 ("_r64": the pilot shape's b64 decode steps then run every projection
    as a Triton kernel in the programmatic-launch chain, gate_up and SiLU as one), and the default
    with mixed prefill + decode steps ("_r16_mixed"); the pilot shape and the offline workload on
    each.
  --plan prefix, hopper, gemv, rope, tools (wave 4): variants_wave4.py."""

from __future__ import annotations

from .variant import ASYNC_POINTS, C1, C64, Variant
from .variants_wave4 import (
    GEMV,
    GEMV_PAIRS,
    HOPPER,
    HOPPER_PAIRS,
    PREFIX,
    PREFIX_PAIRS,
    ROPE,
    ROPE_PAIRS,
    SOLO,
    SOLO_PAIRS,
    TOOLS,
)

__all__ = ["ASYNC_POINTS", "Variant", "plan"]

V3 = (
    Variant(
        "_base",
        dict(async_scheduling="on", fused_kernels=False, prefill_graphs="off"),
        C1 + C64,
        label="compiled halves, eager prefill, alternating",
    ),
    Variant(
        "_fused",
        dict(async_scheduling="on", fused_kernels=True, prefill_graphs="off"),
        C1,
        label="fused kernels, eager prefill",
    ),
    Variant(
        "_v3",
        dict(async_scheduling="on", fused_kernels=True, prefill_graphs="auto"),
        C1 + C64,
        main=True,
        label="fused kernels, prefill graphs (v3 defaults)",
    ),
    Variant(
        "_v3_mixed",
        dict(async_scheduling="on", fused_kernels=True, prefill_graphs="auto", mixed=True),
        C64[:2],
        label="v3 with mixed prefill + decode steps",
    ),
)
V3_PAIRS = (
    ("_base", "_fused", "fused kernels"),
    ("_fused", "_v3", "prefill graphs"),
    ("_base", "_v3", "v3 against before"),
    ("_v3", "_v3_mixed", "mixed against alternating"),
)


WAIT = (
    Variant(
        "_w0",
        dict(async_scheduling="on", prefill_wait_factor=0.0),
        ("c64_isl128_osl128",),
        offline=True,
        label="a prefill step whenever a prompt waits and the last step decoded",
    ),
    Variant(
        "_w1",
        dict(async_scheduling="on", prefill_wait_factor=1.0),
        ("c64_isl128_osl128",),
        main=True,
        label="prompts wait until their summed wait reaches the decoding requests (the default)",
    ),
)


SKINNY = (
    Variant(
        "_cublas",
        dict(async_scheduling="on", skinny_gemm_rows=0),
        C1 + C64[:2],
        offline=True,
        label="torch's GEMM for every projection (before)",
    ),
    Variant(
        "_skinny",
        dict(async_scheduling="on", skinny_gemm_rows=16, one_row_gemv=False),
        C1 + C64[:2],
        main=True,
        label="skinny GEMM for steps of up to 16 rows, one row included (the default before)",
    ),
    Variant(
        "_gemv",
        dict(async_scheduling="on", skinny_gemm_rows=16, one_row_gemv=True, norm_gemv=False),
        C1 + C64[:2],
        offline=True,
        label="and the one-row GEMV for steps of one row",
    ),
)
SKINNY_PAIRS = (
    ("_cublas", "_skinny", "skinny GEMM against torch's"),
    ("_skinny", "_gemv", "the one-row GEMV against the skinny GEMM"),
)


PDL = (
    Variant(
        "_nopdl",
        dict(async_scheduling="on", programmatic_launch=False),
        C1 + C64[:2],
        offline=True,
        label="every kernel waits for the one before it (before)",
    ),
    Variant(
        "_pdl",
        dict(async_scheduling="on", programmatic_launch=True),
        C1 + C64[:2],
        main=True,
        label="programmatic dependent launch (the default)",
    ),
)
PDL_PAIRS = (("_nopdl", "_pdl", "programmatic dependent launch against none"),)


BUDGET_POINTS = ("c64_isl1024_osl256",)
BUDGET = (
    Variant(
        "_b8k",
        dict(async_scheduling="on", max_num_batched_tokens=8192),
        BUDGET_POINTS,
        main=True,
        label="prefill token budget 8192 (the default)",
    ),
    Variant(
        "_b4k",
        dict(async_scheduling="on", max_num_batched_tokens=4096),
        BUDGET_POINTS,
        offline=True,
        label="prefill token budget 4096",
    ),
    Variant(
        "_b16k",
        dict(async_scheduling="on", max_num_batched_tokens=16384),
        BUDGET_POINTS,
        offline=True,
        label="prefill token budget 16384",
    ),
)
BUDGET_PAIRS = (
    ("_b8k", "_b4k", "budget 4096 against 8192"),
    ("_b8k", "_b16k", "budget 16384 against 8192"),
)


ROWS_POINTS = ("c64_isl1024_osl256", "c64_isl128_osl128")
ROWS = (
    Variant(
        "_r16",
        dict(async_scheduling="on", skinny_gemm_rows=16),
        ROWS_POINTS,
        main=True,
        label="skinny GEMM for steps of up to 16 rows (the default)",
    ),
    Variant(
        "_r64",
        dict(async_scheduling="on", skinny_gemm_rows=64),
        ROWS_POINTS,
        offline=True,
        label="skinny GEMM for steps of up to 64 rows",
    ),
    Variant(
        "_r16_mixed",
        dict(async_scheduling="on", skinny_gemm_rows=16, mixed=True),
        ROWS_POINTS[:1],
        offline=True,
        label="the default with mixed prefill + decode steps",
    ),
)
ROWS_PAIRS = (
    ("_r16", "_r64", "skinny GEMM to 64 rows against 16"),
    ("_r16", "_r16_mixed", "mixed against alternating"),
)


PLANS = {
    "v3": (V3, V3_PAIRS),
    "skinny": (SKINNY, SKINNY_PAIRS),
    "pdl": (PDL, PDL_PAIRS),
    "budget": (BUDGET, BUDGET_PAIRS),
    "rows": (ROWS, ROWS_PAIRS),
    "prefix": (PREFIX, PREFIX_PAIRS),
    "wait": (WAIT, (("_w0", "_w1", "prefill wait factor 1 against 0"),)),
    "hopper": (HOPPER, HOPPER_PAIRS),
    "gemv": (GEMV, GEMV_PAIRS),
    "rope": (ROPE, ROPE_PAIRS),
    "solo": (SOLO, SOLO_PAIRS),
    "tools": (TOOLS, ()),
}


def plan(
    name: str, async_scheduling: str
) -> tuple[tuple[Variant, ...], tuple[tuple[str, str, str], ...]]:
    """The variants and A/B pairs of a run."""
    if name in PLANS:
        return PLANS[name]
    off = Variant("", dict(async_scheduling="off"), main=True, label="one step at a time")
    on = Variant(
        "_async", dict(async_scheduling="on"), main=async_scheduling == "on", label="overlapped"
    )
    variants = {"off": (off,), "on": (on,), "ab": (off, on)}[async_scheduling]
    return variants, (
        ("", "_async", "overlapped against one step at a time"),
    ) if async_scheduling == "ab" else ()
