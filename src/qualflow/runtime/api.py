"""Task: the runtime's public API. Loaded from a bundle; the server, benchmarks and correctness use
only this. It validates before queueing, dispatches on capabilities and streams token events."""
from __future__ import annotations

import asyncio
import collections
import queue
import threading
import time
import weakref
from typing import AsyncIterator

import torch

from ..families import get_family
from .detok import IncrementalDecoder
from .engine import Engine, Seq
from .task import (STREAMING, TEXT_GENERATION, CapabilityMissing, FinalEvent, GenerationRequest,
                   InvalidRequest, PromptTooLong, SamplingParams, TokenEvent)

SCORING = "scoring"  # teacher-forced logits, used by family correctness


def compute_dtype(profile_dtype: torch.dtype, device: torch.device) -> torch.dtype:
    """The precision actually used. Half-precision matmuls on a CPU are slow and not what the
    profile qualifies, so on CPU the stored weights are upcast to float32 (recorded as such)."""
    return torch.float32 if device.type == "cpu" else profile_dtype


class Task:
    capabilities = frozenset({TEXT_GENERATION, STREAMING, SCORING})

    def __init__(self, bundle, device: str = "cpu", max_batch: int = 8, max_context: int | None = None,
                 step_delay_s: float = 0.0, eager: bool = False):
        t0 = time.time_ns()
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
        weights = {k: v.to(self.device, self.dtype) for k, v in bundle.weights().items()}
        fast = self.device.type == "cuda" and not eager  # fused ops + CUDA graphs; eager for debugging
        self.model = self.family.build_model(bundle.config, weights, self.context_limit, compile_ops=fast)
        layers, kv_heads, head_dim = self.family.kv_layout(bundle.config)
        cache = torch.zeros(layers, 2, max_batch + 1, kv_heads, self.context_limit, head_dim,
                            dtype=self.dtype, device=self.device)  # slot max_batch: scratch (scoring, graph prefill)
        t1 = time.time_ns()
        runner = None
        if fast:
            from .cuda_graphs import GraphRunner
            runner = GraphRunner(self.model, cache, max_batch, self.context_limit, self.device, max_batch)
        self.engine = Engine(self.model, cache, max_batch, self.context_limit, self.device,
                             step_delay_s=step_delay_s, graphs=runner, scratch_slot=max_batch)
        self.max_batch = max_batch
        self._mailboxes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        if fast:  # compile the prefill variants now (batch 1 and >1), not inside a user's first request
            done: queue.SimpleQueue = queue.SimpleQueue()
            for n in (1, 2):  # submitted back to back, so the two are prefilled as one batch
                for i in range(n):
                    self.engine.submit(GenerationRequest(f"load-{n}-{i}", [1] * 8, SamplingParams(max_new_tokens=2)),
                                       lambda item: item[0] == "final" and done.put(item))
                for _ in range(n):
                    done.get()
        t2 = time.time_ns()
        self.load_timing = {"load_s": (t1 - t0) / 1e9, "graph_capture_s": (t2 - t1) / 1e9,
                            "loaded_at_ns": t2}
        self.info = {"device": str(self.device), "effective_precision": str(self.dtype).removeprefix("torch."),
                     "declared_precision": self.manifest["precision"], "max_batch": max_batch,
                     "context_limit": self.context_limit, "cuda_graphs": runner is not None, "compiled_ops": fast}

    # ---- capabilities and requests ------------------------------------------------------------
    def require(self, capability: str) -> None:
        if capability not in self.capabilities:
            raise CapabilityMissing(capability, self.capabilities)

    def render_prompt(self, instructions: str | None, messages: list[dict]) -> list[int]:
        return self.family.render_prompt(self.tokenizer, self.chat_template, instructions, messages)

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
        """Token events as they are sampled, then one FinalEvent. Closing the iterator early cancels."""
        self.require(STREAMING)
        self.validate(req)
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue = asyncio.Queue()
        mailbox = self._mailboxes.get(loop) or self._mailboxes.setdefault(loop, _Mailbox(loop))
        seq = self.engine.submit(req, lambda item: mailbox.put(inbox, item))
        out = _Collector(self.tokenizer, seq)
        try:
            while True:
                items = [await inbox.get()]
                while not inbox.empty():  # a consumer that fell behind takes what piled up at once
                    items.append(inbox.get_nowait())
                for ev in out.handle_many(items):
                    yield ev
                    if isinstance(ev, FinalEvent):
                        return
        finally:
            if not seq.done:
                self.engine.cancel(req.request_id)

    def generate_sync(self, req: GenerationRequest) -> FinalEvent:
        self.require(TEXT_GENERATION)
        self.validate(req)
        inbox: queue.SimpleQueue = queue.SimpleQueue()
        seq = self.engine.submit(req, inbox.put)
        out = _Collector(self.tokenizer, seq)
        while True:
            ev = out.handle(inbox.get())
            if isinstance(ev, FinalEvent):
                return ev

    def cancel(self, request_id: str) -> None:
        self.engine.cancel(request_id)

    def score(self, token_ids: list[int]) -> torch.Tensor:
        """Teacher-forced logits [T, V] (float32, on CPU) for one sequence, on the scratch slot."""
        self.require(SCORING)
        if not 0 < len(token_ids) <= self.context_limit:
            raise InvalidRequest(f"scoring needs 1..{self.context_limit} tokens", param="input")
        ids = torch.tensor([token_ids], device=self.device)
        pos = torch.arange(len(token_ids), device=self.device)[None]
        with self.engine.lock, torch.inference_mode():
            return self.model(ids, pos, self.engine.cache, self.engine.scratch_slot, len(token_ids))[0].cpu()

    def close(self) -> None:
        self.engine.close()


class _Mailbox:
    """Carries engine items into one asyncio loop with at most one wake-up per engine step, however
    many requests the step served (a wake-up per token would cost the loop more than the model)."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop, self.items, self.lock, self.scheduled = loop, collections.deque(), threading.Lock(), False

    def put(self, inbox: asyncio.Queue, item: tuple) -> None:  # engine thread
        self.items.append((inbox, item))
        with self.lock:
            if self.scheduled:
                return
            self.scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._flush)
        except RuntimeError:  # the loop is closed: nobody is listening
            pass

    def _flush(self) -> None:  # event loop thread
        with self.lock:
            self.scheduled = False
        while self.items:
            inbox, item = self.items.popleft()
            inbox.put_nowait(item)


class _Collector:
    """Turns the engine's raw items into TokenEvent / FinalEvent with incremental text."""

    def __init__(self, tokenizer, seq: Seq):
        self.seq, self.decoder, self.parts = seq, IncrementalDecoder(tokenizer), []

    def handle_many(self, items: list[tuple]) -> list[TokenEvent | FinalEvent]:
        """Merge consecutive token items into one event (one decode), keep the final last."""
        toks = [t for it in items if it[0] == "tokens" for t in it[1]]
        events = [self.handle(("tokens", toks))] if toks else []
        return events + [self.handle(it) for it in items if it[0] == "final"]

    def handle(self, item: tuple) -> TokenEvent | FinalEvent | None:
        rid = self.seq.req.request_id
        if item[0] == "tokens":
            text = self.decoder.push(item[1])
            self.parts.append(text)
            return TokenEvent(rid, item[1], text)
        _, reason, error = item
        tail = self.decoder.flush()
        self.parts.append(tail)
        return FinalEvent(rid, reason, len(self.seq.req.prompt_token_ids), len(self.seq.out),
                          "".join(self.parts), list(self.seq.out), self.seq.timing, error, tail)


def load_task(bundle_dir, device: str = "cpu", max_batch: int = 8, max_context: int | None = None,
              step_delay_s: float = 0.0, eager: bool = False) -> Task:
    from ..bundle import load_bundle
    return Task(load_bundle(bundle_dir), device=device, max_batch=max_batch, max_context=max_context,
                step_delay_s=step_delay_s, eager=eager)
