"""Builds the engine of one process from a bundle, in order: weights on the device (the fused
kernels after their self-check, or compiled ops, on CUDA), the KV block pool, the decode CUDA
graphs, the prefill graphs (fresh, and past position 0), then a warm-up that compiles the prefill
variants before any user's request does. `load_engine` returns the engine with what the Task
reports of it (`info`, `load_timing`)."""

from __future__ import annotations

import logging
import queue
import time
from dataclasses import dataclass

import torch

from ..api.request import GenerationRequest, SamplingParams
from ..config import EngineConfig
from ..kernels import fused, paged_decode, pdl
from .cuda_graphs import DecodeGraphs
from .engine import Engine
from .extend_graphs import ExtendGraphs, context_buckets
from .grammar_steps import GrammarSteps, grammar_setup
from .kernel_choice import fused_ops, rope_inside
from .kv_cache import KvCache, allocate_kv_cache
from .model_runner import ModelRunner
from .outputs import Final
from .prefill_graphs import PrefillGraphs
from .scheduler import Scheduler
from .spec import EngineSpec
from .thinking import ThinkTokens

log = logging.getLogger("qualflow.engine")


def compute_dtype(profile_dtype: torch.dtype, device: torch.device) -> torch.dtype:
    """The precision actually used. Half-precision matmuls on a CPU are slow and not what the
    profile qualifies, so on CPU the stored weights are upcast to float32 (recorded as such)."""
    return torch.float32 if device.type == "cpu" else profile_dtype


@dataclass(frozen=True)
class LoadedEngine:
    engine: Engine
    model: object  # the family's model graph
    max_blocks: int
    info: dict
    load_timing: dict


def load_engine(
    bundle, family, cfg: EngineConfig, context_limit: int, started_ns: int
) -> LoadedEngine:
    """`family`: the bundle's family (registry entry); `started_ns`: when the Task began loading."""
    spec = EngineSpec.resolve(cfg, context_limit, think_tokens(family))
    device = spec.device
    dtype = compute_dtype(getattr(torch, bundle.manifest["precision"]), device)
    fast = device.type == "cuda" and not cfg.eager  # fused ops + CUDA graphs; eager for debugging
    weights = {k: v.to(device, dtype) for k, v in bundle.weights().items()}
    launch = programmatic_launch(cfg, fast, device)
    ops, kernels = fused_ops(
        bundle.config, family.kv_layout(bundle.config), cfg, fast, device, dtype, launch == "on"
    )
    model = family.build_model(
        bundle.config, weights, context_limit, compile_ops=fast and ops is None, ops=ops
    )
    kv = allocate_kv_cache(
        family.kv_layout(bundle.config),
        int(bundle.config["num_attention_heads"]),
        cfg,
        context_limit,
        device,
        dtype,
    )
    t1 = time.time_ns()
    if ops is not None and launch == "on" and not ops.pdl:
        launch = "off: the fused kernels' self-check failed with it"
    elif ops is not None:
        ops.pdl = False  # on in the decode graphs only (decode_graphs)
    graphs = None
    if fast and paged_decode.available():
        kv.attention.rope_inside = rope_inside(bundle.config, kv, ops, cfg, launch == "on")
        graphs, launch = decode_graphs(model, kv, ops, cfg, device, launch)
    prefill, prefill_note = prefill_graphs(model, kv, cfg, device)
    extend, extend_note = extend_graphs(model, kv, cfg, device, prefill, context_limit)
    runner = ModelRunner(spec, model, kv.attention, graphs, prefill, extend)
    engine = Engine(spec, runner, Scheduler(cfg, kv.blocks))
    engine.grammar = GrammarSteps(grammar_setup(bundle, family))  # compiler built meanwhile
    if fast:
        warm_prefill(engine)
    t2 = time.time_ns()
    info = {
        "device": str(device),
        "effective_precision": str(dtype).removeprefix("torch."),
        "declared_precision": bundle.manifest["precision"],
        "max_batch": cfg.max_batch,
        "context_limit": context_limit,
        "cuda_graphs": graphs is not None,
        "compiled_ops": fast,
        "kv_blocks": kv.blocks.num_blocks,
        "kv_block_size": kv.blocks.block_size,
        "kv_cache_gb": kv.attention.pool.numel() * kv.attention.pool.element_size() / 1e9,
        "max_num_batched_tokens": cfg.token_budget(),
        "mixed_batches": cfg.mixed,
        "prefill_wait_factor": cfg.prefill_wait_factor,
        "async_scheduling": engine.async_scheduling,
        "varlen_attention": kv.varlen,
        "extend_attention": kv.extend,
        "fused_kernels": kernels,
        "skinny_gemm_rows": ops.skinny_rows if ops is not None else 0,
        "one_row_gemv": ops is not None and ops.one_row_gemv,
        "norm_gemv": ops is not None and ops.norm_gemv,
        "rope_in_attention": kv.attention.rope_inside,
        "programmatic_launch": launch,
        "prefill_graphs": None if prefill is None else prefill.sizes,
        "prefill_graphs_note": prefill_note,
        "solo_prefill_attention": kv.solo,
        "solo_prefill_graphs": None if prefill is None else prefill.solo_note,
        "extend_graphs": None if extend is None else [extend.tokens, extend.contexts],
        "extend_graphs_note": extend_note,
        "engine_pid": None,
    }
    timing = {
        "load_s": (t1 - started_ns) / 1e9,
        "graph_capture_s": (t2 - t1) / 1e9,
        "loaded_at_ns": t2,
    }
    return LoadedEngine(engine, model, kv.max_blocks, info, timing)


def programmatic_launch(cfg: EngineConfig, fast: bool, device: torch.device) -> str:
    """ "on" when the Triton kernels launch with programmatic dependent launch, else "off" and
    why."""
    if not cfg.programmatic_launch:
        return "off"
    if not fast:
        return "off: no CUDA graphs or Triton kernels on this path"
    why = pdl.supported(device)
    return "on" if why is None else f"off: {why}"


def decode_graphs(
    model,
    kv: KvCache,
    ops: fused.FusedOps | None,
    cfg: EngineConfig,
    device: torch.device,
    launch: str,
) -> tuple[DecodeGraphs, str]:
    """The decode CUDA graphs, their Triton kernels captured with programmatic dependent launch
    when `launch` is "on" (if capture fails so, captured again without it, and the second value
    says why). Only the decode graphs: it shortens a small decode step, while a long prefill step
    measured slower with it, so the kernels launch without it everywhere else (prefill graphs,
    eager steps)."""

    def capture(on: bool) -> DecodeGraphs:
        kv.attention.pdl = on
        if ops is not None:
            ops.pdl = on
        try:
            return DecodeGraphs(model, kv.attention, cfg.max_batch, kv.max_blocks, device)
        finally:
            kv.attention.pdl = False
            if ops is not None:
                ops.pdl = False

    if launch != "on":
        return capture(False), launch
    try:
        return capture(True), launch
    except Exception as e:  # noqa: BLE001 - this driver cannot capture the launches: without them
        log.warning(
            "decode graphs with programmatic dependent launch failed (%s); capturing without it", e
        )
        torch.cuda.synchronize(device)
        return capture(False), f"off: capture failed: {type(e).__name__}: {e}"


def prefill_graphs(
    model, kv: KvCache, cfg: EngineConfig, device: torch.device
) -> tuple[PrefillGraphs | None, str]:
    """The padded fresh-prefill steps (captured on CUDA), and a note on why there are none: they are
    off, the varlen attention is not flash (the reference reads host lengths), or capture failed
    (the engine then prefills eagerly, as without them)."""
    if not cfg.pads_prefill(device.type):
        return None, "off"
    if device.type == "cuda" and not (kv.attention.use_flash or kv.attention.cudnn_fresh):
        return None, f"off: varlen attention is {kv.varlen}, not flash or cuDNN"
    try:
        return PrefillGraphs(
            model,
            kv.attention,
            min(cfg.prefill_graph_tokens, cfg.token_budget()),
            min(cfg.prefill_graph_seqs, cfg.max_batch),
            device,
            capture=device.type == "cuda",
        ), "captured" if device.type == "cuda" else "eager"
    except Exception as e:  # noqa: BLE001 - serve without them, and say why
        log.exception("prefill graph capture failed")
        return None, f"off: capture failed: {type(e).__name__}: {e}"


def extend_graphs(
    model, kv: KvCache, cfg: EngineConfig, device: torch.device, prefill, context_limit: int
) -> tuple[ExtendGraphs | None, str]:
    """The padded prefill steps past position 0, on the fresh ones' token buckets (captured on CUDA
    into their memory pool), and a note on why there are none: the fresh ones are off, or
    --prefill-graph-context 0, or capture failed (those steps then run eagerly)."""
    if prefill is None or cfg.prefill_graph_context <= 0:
        return None, "off" if prefill is None else "off: --prefill-graph-context 0"
    limit = min(cfg.prefill_graph_context, context_limit + prefill.max_tokens)
    try:
        return ExtendGraphs(
            model,
            kv.attention,
            prefill.sizes,
            context_buckets(limit),
            prefill.max_seqs,
            device,
            capture=prefill.capture,
            pool=prefill.pool,
        ), "captured" if prefill.capture else "eager"
    except Exception as e:  # noqa: BLE001 - serve without them, and say why
        log.exception("extend graph capture failed")
        return None, f"off: capture failed: {type(e).__name__}: {e}"


def think_tokens(family) -> ThinkTokens | None:
    """The family's think-block tokens (its `reasoning` spec), None for a family without
    thinking."""
    spec = getattr(family, "reasoning", None)
    return None if spec is None else ThinkTokens(spec.end_id, tuple(spec.close_ids))


def warm_prefill(engine: Engine) -> None:
    """Compile the prefill variants now (batch 1 and >1), not inside a user's first request."""
    done: queue.SimpleQueue = queue.SimpleQueue()
    for n in (1, 2):  # submitted back to back, so the two are prefilled as one batch
        for i in range(n):
            engine.submit(
                GenerationRequest(f"load-{n}-{i}", [1] * 8, SamplingParams(max_new_tokens=2)),
                lambda item: isinstance(item, Final) and done.put(item),
            )
        for _ in range(n):
            done.get()
