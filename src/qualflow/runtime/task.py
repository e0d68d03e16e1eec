"""Task: the runtime's public API. Loaded from a bundle; the server, benchmarks and correctness use
only this. It validates before queueing, dispatches on capabilities and streams token events.

A Task keys its requests by the id the caller gives `GenerationRequest.request_id`; the server passes
the response id (`resp_<hex>`, unique per request), never the client's X-Request-ID, which the client
chooses and may repeat.
"""
from __future__ import annotations

import asyncio
import queue
import time
import weakref
from typing import AsyncIterator

import torch

from ..families import get_family
from .capabilities import SCORING, STREAMING, TEXT_GENERATION
from .delivery import Collector, Mailbox
from . import paged_decode
from .attention import PagedAttention, choose_flash
from .block_manager import RESERVED_BLOCKS, BlockManager
from .engine import Engine
from .engine_proxy import EngineProxy
from .errors import CapabilityMissing, EngineFailed, InvalidRequest, PromptTooLong
from .model_runner import ModelRunner
from .scheduler import Scheduler
from .tokenizing import GilFreeEncoder
from .events import FinalEvent, TokenEvent
from .request import GenerationRequest, SamplingParams


def compute_dtype(profile_dtype: torch.dtype, device: torch.device) -> torch.dtype:
    """The precision actually used. Half-precision matmuls on a CPU are slow and not what the
    profile qualifies, so on CPU the stored weights are upcast to float32 (recorded as such)."""
    return torch.float32 if device.type == "cpu" else profile_dtype


class Task:
    capabilities = frozenset({TEXT_GENERATION, STREAMING, SCORING})

    def __init__(self, bundle, device: str = "cpu", max_batch: int = 8, max_context: int | None = None,
                 step_delay_s: float = 0.0, eager: bool = False, kv_cache_gb: float | None = None,
                 block_size: int | None = None, max_num_batched_tokens: int | None = None, mixed: bool = False,
                 engine_process: bool = False, cpu_threads: int | None = None, gil_switch_ms: float | None = None):
        self._mailboxes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.max_batch = max_batch
        if engine_process:  # the engine (weights, cache, device) in a child process; this side renders and decodes
            self._read_bundle(bundle, "cpu", max_context)
            options = dict(device=device, max_batch=max_batch, max_context=max_context, step_delay_s=step_delay_s,
                           eager=eager, kv_cache_gb=kv_cache_gb, block_size=block_size, mixed=mixed,
                           max_num_batched_tokens=max_num_batched_tokens, cpu_threads=cpu_threads,
                           gil_switch_ms=gil_switch_ms)
            self.engine = EngineProxy(load_verified_task, bundle.path, options)
            self.device = torch.device(device)
            self.load_timing, self.info = self.engine.load_timing, {**self.engine.info, "engine_pid": self.engine.pid}
            return
        t0 = time.time_ns()
        self._read_bundle(bundle, device, max_context)
        fast = self.device.type == "cuda" and not eager  # fused ops + CUDA graphs; eager for debugging
        self._load_weights(compile_ops=fast)
        attention, blocks = self._allocate_kv_cache(max_batch, kv_cache_gb, block_size)
        t1 = time.time_ns()
        graphs = self._capture_graphs(attention, max_batch) if fast and paged_decode.available() else None
        budget = max_num_batched_tokens or max(8192, max_batch)
        self.engine = Engine(ModelRunner(self.model, attention, self.device, graphs),
                             Scheduler(blocks, max_batch, budget, mixed=mixed), self.context_limit, self.device,
                             step_delay_s=step_delay_s)
        if fast:
            self._compile_prefill()
        t2 = time.time_ns()
        self.load_timing = {"load_s": (t1 - t0) / 1e9, "graph_capture_s": (t2 - t1) / 1e9,
                            "loaded_at_ns": t2}
        self.info = {"device": str(self.device), "effective_precision": str(self.dtype).removeprefix("torch."),
                     "declared_precision": self.manifest["precision"], "max_batch": max_batch,
                     "context_limit": self.context_limit, "cuda_graphs": graphs is not None, "compiled_ops": fast,
                     "kv_blocks": blocks.num_blocks, "kv_block_size": blocks.block_size,
                     "kv_cache_gb": attention.pool.numel() * attention.pool.element_size() / 1e9,
                     "max_num_batched_tokens": budget, "mixed_batches": mixed, "varlen_attention": self._varlen,
                     "engine_pid": None}

    # ---- loading, in order ----------------------------------------------------------------------
    def _read_bundle(self, bundle, device: str, max_context: int | None) -> None:
        self.bundle, self.manifest = bundle, bundle.manifest
        self.family = get_family(self.manifest["family"])
        self.device = torch.device(device)
        self.tokenizer = bundle.tokenizer
        self.chat_template = bundle.chat_template
        self.model_name = self.manifest["checkpoint"]["id"]
        self.context_limit = min(int(self.manifest["context_limit"]), max_context or 1 << 30)
        self.vocab_size = int(bundle.config["vocab_size"])
        self.stop_token_ids = self.family.stop_token_ids(bundle.generation_config)
        self.dtype = compute_dtype(getattr(torch, self.manifest["precision"]), self.device)

    def _load_weights(self, compile_ops: bool) -> None:
        weights = {k: v.to(self.device, self.dtype) for k, v in self.bundle.weights().items()}
        self.model = self.family.build_model(self.bundle.config, weights, self.context_limit, compile_ops=compile_ops)

    def _allocate_kv_cache(self, max_batch: int, kv_cache_gb: float | None, block_size: int | None):
        """One pool of fixed-size blocks, sized from a memory budget: `kv_cache_gb`, else on CUDA half
        of the free memory, else (CPU) room for every batch slot at the full context."""
        layers, kv_heads, head_dim = self.family.kv_layout(self.bundle.config)
        block_size = block_size or (64 if self.device.type == "cuda" else 16)
        block_bytes = layers * 2 * block_size * kv_heads * head_dim * torch.empty((), dtype=self.dtype).element_size()
        per_seq = -(-self.context_limit // block_size)
        if kv_cache_gb:
            budget = kv_cache_gb * 1e9
        elif self.device.type == "cuda":
            budget = torch.cuda.mem_get_info(self.device)[0] * 0.5
        else:
            budget = block_bytes * max_batch * per_seq
        # at least one full-context sequence, plus the scratch block
        num_blocks = max(int(budget // block_bytes), per_seq) + RESERVED_BLOCKS
        pool = torch.zeros(layers, 2, num_blocks, block_size, kv_heads, head_dim, dtype=self.dtype, device=self.device)
        attention = PagedAttention(pool, block_size, use_flash=False)
        heads = int(self.bundle.config["num_attention_heads"])
        self._varlen = choose_flash(attention, heads, self.device, self.dtype)
        self._max_blocks = per_seq
        return attention, BlockManager(num_blocks, block_size)

    def _capture_graphs(self, attention, max_batch: int):
        from .cuda_graphs import DecodeGraphs
        return DecodeGraphs(self.model, attention, max_batch, self._max_blocks, self.device)

    def _compile_prefill(self) -> None:
        """Compile the prefill variants now (batch 1 and >1), not inside a user's first request."""
        done: queue.SimpleQueue = queue.SimpleQueue()
        for n in (1, 2):  # submitted back to back, so the two are prefilled as one batch
            for i in range(n):
                self.engine.submit(GenerationRequest(f"load-{n}-{i}", [1] * 8, SamplingParams(max_new_tokens=2)),
                                   lambda item: item[0] == "final" and done.put(item))
            for _ in range(n):
                done.get()

    # ---- capabilities and requests ------------------------------------------------------------
    def require(self, capability: str) -> None:
        if capability not in self.capabilities:
            raise CapabilityMissing(capability, self.capabilities)

    def render_prompt(self, instructions: str | None, messages: list[dict]) -> list[int]:
        return self.family.render_prompt(GilFreeEncoder(self.tokenizer), self.chat_template, instructions, messages)

    def default_params(self, **overrides) -> SamplingParams:
        overrides.setdefault("stop_token_ids", self.stop_token_ids)
        return SamplingParams(**overrides)

    def validate(self, req: GenerationRequest) -> None:
        req.params.validate()
        ids = req.prompt_token_ids
        if not ids:
            raise InvalidRequest("the prompt is empty", param="input")
        if min(ids) < 0 or max(ids) >= self.vocab_size:
            raise InvalidRequest(f"prompt token ids must be in [0, {self.vocab_size})", param="input")
        if len(ids) + req.params.max_new_tokens > self.context_limit:
            raise PromptTooLong(len(ids), req.params.max_new_tokens, self.context_limit)

    # ---- generation ---------------------------------------------------------------------------
    async def generate(self, req: GenerationRequest) -> AsyncIterator[TokenEvent | FinalEvent]:
        """Token events as they are sampled (one per engine step at most), then one FinalEvent.
        Closing the iterator early cancels. Raises EngineFailed when the engine cannot serve."""
        self.require(STREAMING)
        self.validate(req)
        if (why := self.health()) is not None:
            raise EngineFailed(why)
        loop = asyncio.get_running_loop()
        mailbox = self._mailboxes.get(loop) or self._mailboxes.setdefault(loop, Mailbox(loop, self.health))
        box = mailbox.open_delivery()
        seq = self.engine.submit(req, lambda item: mailbox.put(box, item))
        out = Collector(self.tokenizer, seq)
        try:
            while True:
                for ev in out.handle_many(await box.take()):
                    yield ev
                    if isinstance(ev, FinalEvent):
                        return
        finally:
            mailbox.close_delivery(box)
            if not seq.done:
                self.engine.cancel(req.request_id)

    def health(self) -> str | None:
        """None while the engine serves; otherwise why it cannot (its thread or process died, and of what)."""
        return self.engine.health()

    def generate_sync(self, req: GenerationRequest) -> FinalEvent:
        self.require(TEXT_GENERATION)
        self.validate(req)
        inbox: queue.SimpleQueue = queue.SimpleQueue()
        seq = self.engine.submit(req, inbox.put)
        out = Collector(self.tokenizer, seq)
        while True:
            ev = out.handle(inbox.get())
            if isinstance(ev, FinalEvent):
                return ev

    def cancel(self, request_id: str) -> None:
        self.engine.cancel(request_id)

    def score(self, token_ids: list[int]) -> torch.Tensor:
        """Teacher-forced logits [T, V] (float32, on CPU) for one sequence; nothing is cached."""
        self.require(SCORING)
        if not 0 < len(token_ids) <= self.context_limit:
            raise InvalidRequest(f"scoring needs 1..{self.context_limit} tokens", param="input")
        return self.engine.score(token_ids)

    def close(self) -> None:
        self.engine.close()


def load_task(bundle_dir, device: str = "cpu", max_batch: int = 8, max_context: int | None = None,
              step_delay_s: float = 0.0, eager: bool = False, **engine_options) -> Task:
    """engine_options: kv_cache_gb, block_size, max_num_batched_tokens, mixed; engine_process (run the
    engine in a child process), with cpu_threads and gil_switch_ms for that process (see Task)."""
    from ..artifacts.bundle import load_bundle
    return Task(load_bundle(bundle_dir), device=device, max_batch=max_batch, max_context=max_context,
                step_delay_s=step_delay_s, eager=eager, **engine_options)


def load_verified_task(bundle_dir, **options) -> Task:
    """The engine process's loader: the API process verified the bundle already."""
    from ..artifacts.bundle import load_bundle
    return Task(load_bundle(bundle_dir, verify=False), **options)
