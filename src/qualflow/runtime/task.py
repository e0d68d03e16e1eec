"""Task: the runtime's public API. Loaded from a bundle; the server, benchmarks and correctness use
only this. It validates before queueing, dispatches on capabilities and streams token events.

A Task keys its requests by the id the caller gives `GenerationRequest.request_id`; the server
passes the response id (`resp_<hex>`, unique per request), never the client's X-Request-ID, which
the client chooses and may repeat.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import time
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import torch

from ..families import get_family
from .api.capabilities import (
    REASONING,
    SCORING,
    STREAMING,
    STRUCTURED_OUTPUT,
    TEXT_GENERATION,
    TOOLS,
)
from .api.errors import CapabilityMissing, EngineFailed, InvalidRequest, PromptTooLong
from .api.events import FinalEvent, TokenEvent
from .api.request import GenerationRequest, SamplingParams
from .config import EngineConfig
from .engine.interface import EngineClient
from .engine.loader import load_engine, think_tokens
from .engine.synthetic import SyntheticEngine
from .frontend.delivery import Collector, Mailbox, TaskStream
from .frontend.formats import thinking_mode, tool_format
from .frontend.pieces import piece_encoder
from .frontend.tokenizing import GilFreeEncoder
from .frontend.tool_calls import ToolCallParser
from .process.core import EngineProxy
from .process.core_client import AttachedEngine, EngineLink

if TYPE_CHECKING:
    from .process.messages import LinkEnds


class Task:
    capabilities = frozenset(
        {TEXT_GENERATION, STREAMING, SCORING}
    )  # + REASONING where the family has thinking

    def __init__(self, bundle, cfg: EngineConfig, link: LinkEnds | None = None):
        """The engine runs in this process, on its own thread, or in a child process where
        `cfg.in_own_process(device type)` (weights, cache, device there; validation, rendering
        and detokenization here), or, given `link`, in the engine process this process shares
        with other API processes (`Task.attached`)."""
        started_ns = time.time_ns()
        self.cfg = cfg
        self._mailboxes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.max_batch = cfg.max_batch
        self.device = torch.device(cfg.device)
        self._read_bundle(bundle, cfg)
        self.engine: EngineClient
        if link is not None:
            self.engine = attached = AttachedEngine(link)
            self.load_timing, self.info = (
                attached.load_timing,
                {**attached.info, "engine_pid": attached.pid},
            )
            return
        if cfg.engine_kind == "synthetic":
            self._start_synthetic(cfg, started_ns)
            return
        if cfg.in_own_process(self.device.type):
            self.engine = proxy = EngineProxy(load_verified_task, bundle.path, cfg)
            self.load_timing, self.info = proxy.load_timing, {**proxy.info, "engine_pid": proxy.pid}
            return
        loaded = load_engine(bundle, self.family, cfg, self.context_limit, started_ns)
        self.engine, self.model, self._max_blocks = loaded.engine, loaded.model, loaded.max_blocks
        self.load_timing, self.info = loaded.load_timing, loaded.info

    @classmethod
    def attached(cls, bundle_dir, cfg: EngineConfig, link: LinkEnds) -> Task:
        """The Task of one of several API processes sharing one engine process
        (process.core_hub): the bundle's caller side here (the engine process verifies the bundle
        as it loads), its engine over `link`, once the engine process has loaded (it raises as
        that load did)."""
        from ..artifacts.bundle_load import load_bundle

        return cls(load_bundle(bundle_dir, verify=False), cfg, link)

    def _start_synthetic(self, cfg: EngineConfig, started_ns: int) -> None:
        """No model: the synthetic engine, emitting the ids of a plain word (never a stop token)."""
        ids = [
            i
            for i in self.tokenizer.encode(" token", add_special_tokens=False).ids
            if i not in self.stop_token_ids
        ]
        self.engine = SyntheticEngine(  # step_delay_s (tests only) lengthens each step, unrecorded
            cfg.step_ms / 1000 + cfg.step_delay_s, cfg.max_batch, ids, think_tokens(self.family)
        )
        self.model, self._max_blocks = None, 0
        loaded_ns = time.time_ns()
        self.load_timing = {
            "load_s": (loaded_ns - started_ns) / 1e9,
            "graph_capture_s": 0.0,
            "loaded_at_ns": loaded_ns,
        }
        self.info = {
            "device": "none",
            "engine": "synthetic",
            "step_ms": cfg.step_ms,
            "max_batch": cfg.max_batch,
            "context_limit": self.context_limit,
            "engine_pid": None,
        }

    def _read_bundle(self, bundle, cfg: EngineConfig) -> None:
        """What the caller side needs of the bundle: the family, tokenizer, template and limits."""
        self.bundle, self.manifest = bundle, bundle.manifest
        self.family = get_family(self.manifest["family"])
        self.tokenizer = bundle.tokenizer
        self._encoder = GilFreeEncoder(self.tokenizer, pieces=piece_encoder(self.tokenizer))
        self.chat_template = bundle.chat_template
        self.model_name = self.manifest["checkpoint"]["id"]
        self.context_limit = cfg.context_limit(int(self.manifest["context_limit"]))
        if capped := cfg.context_capped(int(self.manifest["context_limit"])):
            logging.getLogger("qualflow.runtime").warning(capped)
        self.vocab_size = int(bundle.config["vocab_size"])
        self.stop_token_ids = self.family.stop_token_ids(bundle.generation_config)
        self.reasoning, self.reasoning_unavailable = thinking_mode(self.family, self.tokenizer)
        if self.reasoning is not None:
            self.capabilities = self.capabilities | {REASONING}
        self.tool_calls, self.tools_unavailable = tool_format(
            self.family, self.tokenizer, cfg.engine_kind == "synthetic"
        )
        if cfg.engine_kind != "synthetic":  # the synthetic engine samples no logits
            self.capabilities = self.capabilities | {STRUCTURED_OUTPUT}
            if self.tool_calls is not None:
                self.capabilities = self.capabilities | {TOOLS}

    def tool_parser(self) -> ToolCallParser:
        """A parser of one request's answer text into calls (capability `tools`)."""
        self.require(TOOLS)
        return ToolCallParser(self.tool_calls)

    # ---- capabilities and requests ------------------------------------------------------------
    def require(self, capability: str) -> None:
        if capability not in self.capabilities:
            raise CapabilityMissing(capability, self.capabilities)

    def render_prompt(
        self,
        instructions: str | None,
        messages: list[dict],
        thinking: bool = False,
        tools: list[dict] | None = None,
    ) -> list[int]:
        """Prompt ids through the family's chat template; `thinking` (capability `reasoning`):
        rendered with thinking on, ending in the opened think block; `tools` (capability `tools`):
        Responses function tools, with `messages` holding function_call and function_call_output
        items as well (families/tools.py)."""
        extra = {}
        if thinking:
            self.require(REASONING)
            extra["thinking"] = True
        if tools:
            self.require(TOOLS)
            extra["tools"] = tools
        return self.family.render_prompt(
            self._encoder, self.chat_template, instructions, messages, **extra
        )

    def default_params(self, **overrides) -> SamplingParams:
        overrides.setdefault("stop_token_ids", self.stop_token_ids)
        return SamplingParams(**overrides)

    def validate(self, req: GenerationRequest) -> None:
        req.params.validate()
        ids = req.prompt_token_ids
        if not ids:
            raise InvalidRequest("the prompt is empty", param="input")
        if min(ids) < 0 or max(ids) >= self.vocab_size:
            raise InvalidRequest(
                f"prompt token ids must be in [0, {self.vocab_size})", param="input"
            )
        if len(ids) + req.params.max_new_tokens > self.context_limit:
            raise PromptTooLong(len(ids), req.params.max_new_tokens, self.context_limit)
        if req.thinking is not None:
            self._validate_thinking(req)

    def _validate_thinking(self, req: GenerationRequest) -> None:
        if self.reasoning is None:
            raise InvalidRequest(
                f"thinking is not available: {self.reasoning_unavailable}",
                param="reasoning",
                code="unsupported_parameter",
            )
        budget, least = req.thinking.budget, self.reasoning.min_budget
        if budget is not None and budget < least:
            raise InvalidRequest(
                f"thinking budget {budget} is below the {least} tokens that close a think block",
                param="reasoning",
            )

    # ---- generation ---------------------------------------------------------------------------
    def open(self, req: GenerationRequest) -> TaskStream:
        """Validate and submit `req` now; its events come from iterating the returned stream
        (close it to cancel). Raises as `generate` does, before anything is submitted."""
        self.require(STREAMING)
        self.validate(req)
        if (why := self.health()) is not None:
            raise EngineFailed(why)
        loop = asyncio.get_running_loop()
        mailbox = self._mailboxes.get(loop) or self._mailboxes.setdefault(
            loop, Mailbox(loop, self.health)
        )
        if isinstance(
            self.engine, EngineLink
        ):  # its messages are read on this loop, with one wake-up a step
            self.engine.read_on(loop)
        box = mailbox.open_delivery()
        seq = self.engine.submit(req, lambda item: mailbox.put(box, item))
        return TaskStream(
            mailbox, box, seq, Collector(self.tokenizer, seq, self._end_id), self.engine.cancel
        )

    async def generate(self, req: GenerationRequest) -> AsyncIterator[TokenEvent | FinalEvent]:
        """Token events as they are sampled (one per engine step at most), then one FinalEvent.
        Closing the iterator early cancels. Raises EngineFailed when the engine cannot serve."""
        stream = self.open(req)
        try:
            async for ev in stream:
                yield ev
        finally:
            await stream.aclose()

    @property
    def _end_id(self) -> int | None:
        return None if self.reasoning is None else self.reasoning.end_id

    def health(self) -> str | None:
        """None while the engine serves; otherwise why it cannot (its thread or process died, and
        of what)."""
        return self.engine.health()

    def generate_sync(self, req: GenerationRequest) -> FinalEvent:
        self.require(TEXT_GENERATION)
        self.validate(req)
        if isinstance(
            self.engine, EngineLink
        ):  # called on a loop that reads the engine's pipe, it would wait on itself
            self.engine.before_blocking_wait()
        inbox: queue.SimpleQueue = queue.SimpleQueue()
        seq = self.engine.submit(req, inbox.put)
        out = Collector(self.tokenizer, seq, self._end_id)
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


def load_task(bundle_dir, cfg: EngineConfig | None = None) -> Task:
    """The Task of a bundle (verified first), run as `cfg` says (EngineConfig's defaults if
    None)."""
    from ..artifacts.bundle_load import load_bundle

    return Task(load_bundle(bundle_dir), cfg if cfg is not None else EngineConfig())


def load_verified_task(bundle_dir, cfg: EngineConfig) -> Task:
    """The engine process's loader: the API process verified the bundle already."""
    from ..artifacts.bundle_load import load_bundle

    return Task(load_bundle(bundle_dir, verify=False), cfg)
