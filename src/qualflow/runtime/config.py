"""EngineConfig: how a Task runs its engine. The field defaults are the only defaults; the CLI flags
of `qualflow serve`, `qualflow session` and `qualflow bench task` are generated from the fields
(qualflow.configs), and the workflow schema's `server:` defaults agree with them (a test checks).
The A/B switches whose question is settled (`settled=True`: their default won) are left out of
--help; they stay settable, for the next A/B.
A field whose help says "0: ..." is resolved in one place: a method of the class below, or, for the
KV pool size (it needs the device's free memory), the engine's loader.

`cpu_threads` and `gil_switch_ms` are settings of a process (`apply_to_this_process`): the engine
process applies them to itself; an in-process Task leaves them to the program that runs it
(`qualflow serve`, `qualflow bench task`). The dataclass is what the engine process receives
(pickled) from its parent."""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields
from typing import Literal

from qualflow.configs import setting


@dataclass(frozen=True)
class EngineConfig:
    device: str = setting("cpu", help="torch device: cpu, cuda or cuda:N")
    max_batch: int = setting(8, help="requests decoded together (the running batch)")
    max_context: int = setting(
        4096,
        help="tokens per request (prompt + output), at most the bundle's context limit (0: the "
        "bundle's limit); a request that cannot fit is rejected up front, so the full 40k of "
        "Qwen3 is opt-in",
    )
    kv_cache_gb: float = setting(
        0.0,
        help="KV block pool size in GB (0: half the free GPU memory on cuda; on cpu room for every"
        " batch slot at max-context)",
    )
    block_size: int = setting(0, help="tokens per KV block (0: 64 on cuda, 16 on cpu)")
    max_num_batched_tokens: int = setting(
        0, help="prefill token budget of one engine step (0: max(8192, max-batch))"
    )
    mixed: bool = setting(
        False,
        settled=True,
        help="let one engine step hold prefill and decode together (A/B: alternating steps won, "
        "since a mixed step runs its decodes without a captured graph)",
    )
    prefill_wait_factor: float = setting(
        1.0,
        help="alternating steps: while requests decode, new prompts wait for their prefill step "
        "until the decode steps they waited, summed over the prompts it can admit, reach this"
        " factor times the decoding requests (a prefill step holds each of those back about "
        "one step), so prompts that arrive one by one share a prefill step; never when "
        "nothing decodes or the admissible prompts fill the token budget. 0: a prefill step "
        "whenever a prompt waits and the last step decoded",
    )
    async_scheduling: Literal["auto", "on", "off"] = setting(
        "auto",
        settled=True,
        help="overlap the host with the device: schedule and build step n+1 while step n runs, "
        "read sampled tokens back one step late (a stop is seen one step later; the extra "
        "token of a stopped request is discarded); greedy output is identical. auto: on for "
        "cuda (the host work hides behind the device step), off for cpu (nothing to hide "
        "behind)",
    )
    eager: bool = setting(False, help="no compiled ops, no CUDA graphs (debugging)")
    fused_kernels: bool = setting(
        True,
        settled=True,
        help="run each layer through the fused elementwise kernels (residual add + RMSNorm, "
        "q/k-norm + RoPE + KV-cache store, SiLU-mul: Triton on cuda after a self-check at "
        "load, their torch reference on cpu) instead of the compiled layer halves; fewer "
        "kernels per decode step; greedy output is the same (--no-fused-kernels: the compiled"
        " halves, for A/B)",
    )
    skinny_gemm_rows: int = setting(
        16,
        settled=True,
        help="steps of at most this many rows (decode at small batch) run each projection as one "
        "Triton kernel that streams the weight once, instead of torch's GEMM; cuda with the "
        "fused kernels, after a self-check at load; at most 64. 0: torch's GEMM for every "
        "step (A/B)",
    )
    one_row_gemv: bool = setting(
        True,
        help="a decode step of one row runs each projection as a GEMV without tensor cores "
        "(kernels.gemv: narrow column blocks, every SM busy) instead of the skinny GEMM; cuda "
        "with the skinny GEMM on, after a self-check at load; --no-one-row-gemv: the skinny GEMM "
        "for one row too (A/B: --plan gemv)",
    )
    norm_gemv: bool = setting(
        True,
        help="with the one-row GEMV, a decode step of one row runs the residual add and RMSNorm "
        "before the qkv and gate_up projections inside their GEMV (kernels.norm_gemv: two "
        "kernels fewer a layer); cuda, after a self-check at load; --no-norm-gemv: the "
        "add_rms_norm kernel before the GEMV (A/B: --plan gemv)",
    )
    rope_in_attention: bool = setting(
        False,
        help="a decode step's attention kernel takes each layer's qkv projection as it is and "
        "does the q/k-norm + RoPE and the K/V-cache store itself (kernels.paged_decode: one "
        "kernel fewer a layer); cuda with the fused kernels, after a self-check at load (A/B: "
        "--plan rope; off: on an H100 it measured slower, b1 replay 0.852 against 0.826 ms, "
        "c64 ISL 128 0.87x)",
    )
    programmatic_launch: bool = setting(
        True,
        settled=True,
        help="capture the decode step's Triton kernels with programmatic dependent launch where "
        "the GPU and Triton support it (Hopper and later): each kernel may start while the "
        "one before it finishes and waits for it before touching its data, so a small decode "
        "step pays less per kernel; prefill launches without it (slower with it); checked at "
        "load (--no-programmatic-launch: every kernel waits for the one before, for A/B)",
    )
    varlen_attention: Literal["flash", "cudnn", "extend"] = setting(
        "flash",
        help="the attention kernel of prefill steps on cuda: flash (flash attention's varlen "
        "kernel), cudnn (cuDNN's SDPA with ragged offsets, tried on compute capability 9.0 "
        "and later, checked against the reference at load on a fresh and a chunked step; a step "
        "kind it fails runs flash), or extend (fresh steps of at most --extend-kernel-tokens "
        "tokens through the extend kernel too, where it runs; else flash: on an H100, c1 ISL "
        "1024 TTFT 5.47 against 5.69 ms, but the pilot shape at 0.86 of flash's throughput). cpu "
        "runs the reference loop",
    )
    solo_prefill_attention: Literal["varlen", "cudnn"] = setting(
        "varlen",
        help="attention of a fresh prefill step of one sequence (a lone prompt: a c1 request's "
        "first step) on cuda: varlen (as any prefill step), or cudnn (cuDNN's dense causal "
        "SDPA over the padded step, Hopper-native, in prefill graphs of their own; flash's "
        "varlen kernel fills one wave of 8 query blocks x 16 heads there, 63 us a layer at "
        "1,024 tokens on an H100). Checked against the reference at load, on compute capability "
        "9.0 and later; where it fails, disagrees or does not capture, varlen. cpu runs torch's "
        "dense SDPA (A/B: --plan solo)",
    )
    extend_attention: Literal["kernel", "gather"] = setting(
        "kernel",
        help="attention of prefill steps past position 0 (a prompt after its cached prefix, a "
        "later chunk) on cuda: kernel (one Triton kernel reads the context through the block "
        "tables, its keys split across programs when the step is small; checked against the "
        "reference at load, else gather), or gather (each layer gathers the context from the "
        "pool for the varlen kernel: greedy output then equals the prefix cache off's token for "
        "token, where the kernel's other summation order can flip a near tie). cpu gathers",
    )
    extend_kernel_tokens: int = setting(
        2048,
        help="the most new tokens of a step past position 0 that takes the extend kernel "
        "(--extend-attention kernel); a larger step gathers its context, since the varlen "
        "kernel's own parallelism fills the GPU there",
    )
    prefill_graphs: Literal["auto", "on", "off"] = setting(
        "auto",
        settled=True,
        help="run a fresh prefill step (every sequence from position 0, at most "
        "--prefill-graph-tokens tokens and --prefill-graph-seqs sequences) padded to a token "
        "bucket, as a CUDA graph captured at load (pads write to the scratch KV block); short"
        " prompts skip the per-kernel host cost. auto: on for cuda with flash varlen "
        "attention, off for cpu; on for cpu runs the padded step eagerly (tests)",
    )
    prefill_graph_tokens: int = setting(
        2048, help="largest prefill token bucket captured (--prefill-graphs)"
    )
    prefill_graph_seqs: int = setting(
        16, help="most sequences in one captured prefill step (--prefill-graphs)"
    )
    prefill_graph_context: int = setting(
        8192,
        help="prefill steps past position 0 (a prompt after its cached prefix, a later chunk) "
        "padded to a token bucket and a context bucket (512 doubling, up to this many context "
        "rows or the context limit plus the largest token bucket, whichever is less) and captured"
        " with the fresh ones (--prefill-graphs); 0: those steps run eagerly (A/B)",
    )
    prefix_caching: bool = setting(
        True,
        help="keep the K/V of full blocks (prompt and output) in the KV pool after their request, "
        "keyed by a chained hash of their tokens, and serve a later prompt's matching prefix from "
        "there instead of computing it again (least recently used evicted first; the usage's "
        "input_tokens_details.cached_tokens counts the tokens so served); --no-prefix-caching: "
        "every prompt computed in full",
    )
    engine_process: Literal["auto", "on", "off"] = setting(
        "auto",
        help="run the engine (model, KV cache, device) in its own process, so the HTTP side's work"
        " overlaps the device step instead of sharing one GIL with it. auto: on for cuda, off"
        " for cpu (every CPU Task user, correctness and bench task included, keeps the engine"
        " in its process); a bare --engine-process means on, --no-engine-process off",
        bare="on",
        negated="off",
    )
    engine_kind: Literal["model", "synthetic"] = setting(
        "model",
        flag="--engine",
        help="model: the bundle's model; synthetic: no model, one token per running request every "
        "--step-ms (the real tokenizer, HTTP path, timing records and accounting), to measure"
        " the serving path's own ceiling; it runs on a thread of the serving process",
    )
    step_ms: float = setting(
        1.0, help="the synthetic engine's step clock in ms (--engine synthetic only)"
    )
    cpu_threads: int = setting(
        0, help="torch intra-op threads (0: torch's choice); 1 when AIPerf shares a small CPU"
    )
    gil_switch_ms: float = setting(
        1.0,
        help="Python's thread switch interval in ms, so the engine thread gets the GIL back sooner"
        " after its GPU wait (0: leave Python's 5 ms)",
    )
    step_delay_s: float = setting(0.0, hidden=True, help="sleep per engine step (tests only)")

    def context_limit(self, bundle_limit: int) -> int:
        """Tokens per request: max_context, at most the bundle's limit (0: the bundle's limit)."""
        return min(bundle_limit, self.max_context) if self.max_context else bundle_limit

    def context_capped(self, bundle_limit: int) -> str | None:
        """The warning for a max_context chosen above the bundle's limit (capped, so said, not
        silently); None for one that fits, and for the default, which is a cap by design."""
        default = next(f.default for f in fields(self) if f.name == "max_context")
        if self.max_context in (0, default) or self.max_context <= bundle_limit:
            return None
        return (
            f"--max-context {self.max_context} is above the model's context limit of "
            f"{bundle_limit} tokens: requests are bounded at {bundle_limit}"
        )

    def overlaps(self, device_type: str) -> bool:
        """Whether the engine runs with overlapped scheduling on this device type."""
        if self.async_scheduling == "auto":
            return device_type == "cuda"
        return self.async_scheduling == "on"

    def pads_prefill(self, device_type: str) -> bool:
        """Whether fresh prefill steps run padded to a token bucket (captured on cuda)."""
        if self.prefill_graphs == "auto":
            return device_type == "cuda" and not self.eager and self.prefill_graph_tokens > 0
        return self.prefill_graphs == "on" and self.prefill_graph_tokens > 0

    def in_own_process(self, device_type: str) -> bool:
        """Whether the engine runs in a child process on this device type."""
        if self.engine_process not in ("auto", "on", "off"):  # e.g. the switch's old True/False
            raise ValueError(f"engine_process must be auto, on or off, not {self.engine_process!r}")
        if self.engine_kind == "synthetic":  # no model to move away from the HTTP side
            return False
        if self.engine_process == "auto":
            return device_type == "cuda"
        return self.engine_process == "on"

    def kv_block_size(self, device_type: str) -> int:
        return self.block_size or (64 if device_type == "cuda" else 16)

    def token_budget(self) -> int:
        """The prefill token budget of one step (at least one token per batch slot)."""
        return self.max_num_batched_tokens or max(8192, self.max_batch)

    def apply_to_this_process(self) -> None:
        """Set cpu_threads and gil_switch_ms for the calling process (0: leave that one as it
        is)."""
        if self.cpu_threads:
            import torch  # here only: this module stays light for the CLI

            torch.set_num_threads(self.cpu_threads)
        if self.gil_switch_ms:
            sys.setswitchinterval(self.gil_switch_ms / 1000)
