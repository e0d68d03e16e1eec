"""The engine variants of the fourth wave's plans (variants.py has the rest, and `plan`):

--plan prefix (issue 48): overlapped; the prefix cache on ("_pc", the default) against off
  ("_nopc") on single-turn points with no shared prefix (a cache that finds nothing must cost
  nothing); the offline workload on both. The multi-turn point measures what it finds.
--plan hopper (issue 49): overlapped; prefill attention through flash attention's varlen kernel
  ("_flash", the default) against fresh steps of at most --extend-kernel-tokens through the
  extend kernel too ("_extend": extend_attention says "+fresh" where it took them; family
  correctness runs on it) on c1 ISL 1024 TTFT and the pilot shape (c64, ISL 1024 / OSL 256);
  cuDNN's SDPA stays selectable (--varlen-attention cudnn).
--plan gemv (issue 49): overlapped; the skinny GEMM for one-row decode steps ("_skinny", the
  default before) against the one-row GEMV ("_gemv") and the GEMV with the RMSNorm before the qkv
  and gate_up projections in it ("_gemv_norm", the default: family correctness runs on it) on the
  c1 points, where every decode step is one row: ITL, and each variant's decode-step figures
  (kernels and GPU us per b1 step, the step over its weight-read floor). Steps of two rows and
  more run as before.
--plan rope (issue 49): overlapped, the default engine with the q/k-norm + RoPE as its own kernel
  before decode attention ("_sep") against inside the decode attention kernel ("_in": family
  correctness runs on it) on the c1 points and the Task's c64 point: ITL, tok/s and the b1 step's
  kernels and GPU us.

--plan solo (issue 49): overlapped, the default engine with a fresh prefill step of one sequence
  through flash's varlen kernel ("_varlen") against cuDNN's dense causal SDPA in prefill graphs of
  its own ("_cudnn": family correctness runs on it) on the c1 points: TTFT first.

--plan tools (issue 46): overlapped, the default engine ("_tools"): the pilot point, then the
  constrained-decoding figures on the same load (constrained.py): required calls against no
  tools, a shared batch against one without constrained rows, a new and a cached schema's
  added TTFT."""

from __future__ import annotations

from .variant import Variant

PREFIX_POINTS = ("c1_isl128_osl256", "c64_isl1024_osl256", "c64_isl128_osl128")
PREFIX = (
    Variant(
        "_pc",
        dict(async_scheduling="on", prefix_caching=True),
        PREFIX_POINTS,
        main=True,
        label="prefix cache on (the default)",
    ),
    Variant(
        "_nopc",
        dict(async_scheduling="on", prefix_caching=False),
        PREFIX_POINTS,
        offline=True,
        label="prefix cache off",
    ),
)
PREFIX_PAIRS = (("_nopc", "_pc", "prefix cache on against off (nothing shared)"),)


HOPPER_POINTS = ("c1_isl1024_ttft", "c64_isl1024_osl256")
HOPPER = (
    Variant(
        "_flash",
        dict(async_scheduling="on", varlen_attention="flash"),
        HOPPER_POINTS,
        label="flash attention's varlen kernel for prefill (the default)",
    ),
    Variant(  # of record: family correctness runs on the new kernel
        "_extend",
        dict(async_scheduling="on", varlen_attention="extend"),
        HOPPER_POINTS,
        main=True,
        label="fresh prefill steps of up to --extend-kernel-tokens through the extend kernel",
    ),
)
HOPPER_PAIRS = (
    ("_flash", "_extend", "the extend kernel for small fresh prefill steps against flash"),
)


TOOLS = (
    Variant(
        "_tools",
        dict(async_scheduling="on"),
        ("c64_isl1024_osl256",),
        main=True,
        constrained=True,
        label="the default engine; constrained decoding beside its pilot point",
    ),
)


GEMV_POINTS = ("c1_isl128_osl256", "c1_isl1024_ttft")
GEMV = (
    Variant(
        "_skinny",
        dict(async_scheduling="on", skinny_gemm_rows=16, one_row_gemv=False),
        GEMV_POINTS,
        label="the skinny GEMM for one-row steps too (before)",
    ),
    Variant(
        "_gemv",
        dict(async_scheduling="on", skinny_gemm_rows=16, one_row_gemv=True, norm_gemv=False),
        GEMV_POINTS,
        label="one-row decode steps through the one-row GEMV",
    ),
    Variant(  # of record: family correctness runs on the new kernels
        "_gemv_norm",
        dict(async_scheduling="on", skinny_gemm_rows=16, one_row_gemv=True, norm_gemv=True),
        GEMV_POINTS,
        main=True,
        label="and the RMSNorm before qkv and gate_up inside their GEMV (the default)",
    ),
)
GEMV_PAIRS = (
    ("_skinny", "_gemv", "the one-row GEMV against the skinny GEMM at one row"),
    ("_gemv", "_gemv_norm", "the RMSNorm inside the GEMV against before it"),
)


ROPE_POINTS = ("c1_isl128_osl256", "c1_isl1024_ttft", "c64_isl128_osl128")
ROPE = (
    Variant(
        "_sep",
        dict(async_scheduling="on", rope_in_attention=False),
        ROPE_POINTS,
        label="q/k-norm + RoPE as its own kernel before decode attention (the default)",
    ),
    Variant(  # of record: family correctness runs on the new kernel
        "_in",
        dict(async_scheduling="on", rope_in_attention=True),
        ROPE_POINTS,
        main=True,
        label="q/k-norm + RoPE and the K/V store inside the decode attention kernel",
    ),
)
ROPE_PAIRS = (("_sep", "_in", "q/k-norm + RoPE inside decode attention against before it"),)


SOLO_POINTS = ("c1_isl1024_ttft", "c1_isl128_osl256")
SOLO = (
    Variant(
        "_varlen",
        dict(async_scheduling="on", solo_prefill_attention="varlen"),
        SOLO_POINTS,
        label="a lone prompt's prefill through flash's varlen kernel (the default)",
    ),
    Variant(  # of record: family correctness runs on it
        "_cudnn",
        dict(async_scheduling="on", solo_prefill_attention="cudnn"),
        SOLO_POINTS,
        main=True,
        label="a lone prompt's prefill through cuDNN's dense causal SDPA",
    ),
)
SOLO_PAIRS = (("_varlen", "_cudnn", "cuDNN's dense SDPA for a lone prompt against flash varlen"),)
