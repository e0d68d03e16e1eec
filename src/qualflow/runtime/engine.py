"""The engine: one thread owns the model and runs continuous batching over a slot KV cache.

Scheduling, at every step boundary:
  1. take new submissions and cancellations from the inbox (thread-safe, FIFO);
  2. admit waiting requests into free slots, oldest first, and prefill them together;
  3. run one decode step over every running request.
Running requests always occupy slots 0..n-1: when one leaves, the last one's KV rows move into the
hole. So a decode step works on a contiguous prefix of the cache (a view, no gather), which is what a
CUDA graph captured per padded batch size needs.

Delivery goes through each request's `sink` callable: ("tokens", [ids]) as they are sampled, then
exactly one ("final", reason, error). The sink must be cheap and thread-safe.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from .sampling import sample
from .events import TaskTiming
from .request import GenerationRequest

log = logging.getLogger("qualflow.engine")
_STOP = object()


@dataclass
class Seq:
    req: GenerationRequest
    sink: Callable[[tuple], None]
    timing: TaskTiming
    out: list[int] = field(default_factory=list)
    slot: int = -1
    generator: torch.Generator | None = None
    done: bool = False

    @property
    def length(self) -> int:  # tokens whose KV is (or is about to be) in the cache
        return len(self.req.prompt_token_ids) + len(self.out)


class Engine:
    def __init__(self, model, cache: torch.Tensor, max_batch: int, max_len: int, device: torch.device,
                 max_prefill_tokens: int = 8192, step_delay_s: float = 0.0, graphs=None, scratch_slot: int = -1):
        self.model, self.cache, self.device = model, cache, device
        self.max_batch, self.max_len = max_batch, max_len
        self.max_prefill_tokens = max_prefill_tokens
        self.step_delay_s = step_delay_s          # test-only slowdown, 0 in production
        self.graphs = graphs                      # optional CUDA graphs (cuda_graphs.GraphRunner)
        self.scratch_slot = scratch_slot
        self.lock = threading.Lock()              # held while the model runs
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.waiting: list[Seq] = []
        self.running: list[Seq] = []              # running[i].slot == i
        self.thread = threading.Thread(target=self._loop, name="qualflow-engine", daemon=True)
        self.thread.start()

    # ---- called from any thread -------------------------------------------------------------
    def submit(self, req: GenerationRequest, sink: Callable[[tuple], None]) -> Seq:
        seq = Seq(req, sink, TaskTiming(submitted_ns=time.time_ns()))
        if req.params.seed is not None:
            seq.generator = torch.Generator(device=self.device).manual_seed(req.params.seed)
        self.inbox.put(("submit", seq))
        return seq

    def cancel(self, request_id: str) -> None:
        self.inbox.put(("cancel", request_id))

    def close(self) -> None:
        self.inbox.put(_STOP)
        self.thread.join(timeout=30)

    # ---- the loop ---------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            block = not self.running and not self.waiting
            try:
                while True:
                    item = self.inbox.get(block=block)
                    block = False
                    if item is _STOP:
                        return self._shutdown()
                    kind, val = item
                    if kind == "submit":
                        self.waiting.append(val)
                    else:
                        self._cancel(val)
            except queue.Empty:
                pass
            self._admit()
            if self.running:
                self._decode()

    def _shutdown(self) -> None:
        for seq in self.waiting + self.running:
            self._finish(seq, "cancelled", "engine shut down")

    def _cancel(self, request_id: str) -> None:
        for seq in [s for s in self.waiting if s.req.request_id == request_id]:
            self.waiting.remove(seq)
            self._finish(seq, "cancelled")
        for seq in [s for s in self.running if s.req.request_id == request_id]:
            self._finish(seq, "cancelled")
        self._compact()

    def _admit(self) -> None:
        batch, tokens = [], 0
        while self.waiting and len(self.running) + len(batch) < self.max_batch:
            n = len(self.waiting[0].req.prompt_token_ids)
            if batch and tokens + n > self.max_prefill_tokens:
                break
            seq = self.waiting.pop(0)
            seq.timing.first_scheduled_ns = time.time_ns()
            seq.slot = len(self.running) + len(batch)
            batch.append(seq)
            tokens += n
        if not batch:
            return
        self.running.extend(batch)
        try:
            T = max(len(s.req.prompt_token_ids) for s in batch)
            with self.lock, torch.inference_mode():
                logits = None
                if self.graphs is not None and len(batch) == 1:
                    logits = self.graphs.prefill(batch[0].req.prompt_token_ids)
                    if logits is not None:  # computed on the scratch slot: move the KV rows into place
                        self.cache[:, :, batch[0].slot, :, :T] = self.cache[:, :, self.scratch_slot, :, :T]
                if logits is None:
                    logits = self._prefill_eager(batch, T)
                self._sample_and_emit(batch, logits)
        except Exception as e:  # fail only these requests; the engine keeps serving
            log.exception("prefill failed")
            for s in batch:
                self._finish(s, "error", f"prefill failed: {type(e).__name__}: {e}")
        self._compact()

    def _prefill_eager(self, batch: list[Seq], T: int) -> torch.Tensor:
        """One forward over the new requests' prompts, right-padded to T."""
        ids = torch.zeros(len(batch), T, dtype=torch.long)
        for i, s in enumerate(batch):
            ids[i, :len(s.req.prompt_token_ids)] = torch.tensor(s.req.prompt_token_ids)
        pos = torch.arange(T).expand(len(batch), T)
        last = torch.tensor([len(s.req.prompt_token_ids) - 1 for s in batch])
        return self.model(ids.to(self.device), pos.to(self.device), self.cache, batch[0].slot, T,
                          logit_index=last.to(self.device))

    def _decode(self) -> None:
        batch = list(self.running)
        try:
            ids = torch.tensor([[s.out[-1]] for s in batch])
            pos = torch.tensor([[s.length - 1] for s in batch])
            kv_len = max(s.length for s in batch)
            with self.lock, torch.inference_mode():
                if self.graphs is not None:
                    logits = self.graphs.decode(ids, pos, len(batch), kv_len)
                else:
                    logits = self.model(ids.to(self.device), pos.to(self.device), self.cache, 0, kv_len,
                                        logit_index=torch.zeros(len(batch), dtype=torch.long, device=self.device))
                self._sample_and_emit(batch, logits)
        except Exception as e:
            log.exception("decode step failed")
            for s in batch:
                if not s.done:
                    self._finish(s, "error", f"decode failed: {type(e).__name__}: {e}")
        self._compact()
        if self.step_delay_s:
            time.sleep(self.step_delay_s)

    def _sample_and_emit(self, batch: list[Seq], logits: torch.Tensor) -> None:
        params = [s.req.params for s in batch]
        for i, s in enumerate(batch):  # stop tokens are suppressed until min_tokens are out
            if len(s.out) < s.req.params.min_tokens and s.req.params.stop_token_ids:
                logits[i, list(s.req.params.stop_token_ids)] = float("-inf")
        if all(p.temperature == 0 for p in params):
            toks = logits.argmax(dim=-1).tolist()
        else:
            dev = logits.device
            toks = sample(
                logits,
                torch.tensor([p.temperature for p in params], device=dev),
                torch.tensor([p.top_k for p in params], device=dev),
                torch.tensor([p.top_p for p in params], device=dev),
                [s.generator for s in batch],
                need_filter=any(p.top_k > 0 or p.top_p < 1 for p in params),
            ).tolist()  # the one host sync per step: stop decisions need the tokens
        now = time.time_ns()
        for s, t in zip(batch, toks):
            s.out.append(t)
            if s.timing.first_token_ns is None:
                s.timing.first_token_ns = now
            p = s.req.params
            s.sink(("tokens", [t]))
            if t in p.stop_token_ids and not p.ignore_eos and len(s.out) >= p.min_tokens:
                self._finish(s, "stop")
            elif len(s.out) >= p.max_new_tokens or s.length >= self.max_len:
                self._finish(s, "length")

    def _finish(self, seq: Seq, reason: str, error: str | None = None) -> None:
        if seq.done:
            return
        seq.done = True
        seq.timing.finished_ns = time.time_ns()
        seq.sink(("final", reason, error))

    def _compact(self) -> None:
        """Drop finished requests from the running set and keep slots contiguous."""
        if all(not s.done for s in self.running):
            return
        keep = [s for s in self.running if not s.done]
        for new_slot, s in enumerate(keep):
            if s.slot != new_slot:  # move its KV rows down into the freed slot
                n = s.length - 1 if s.out else s.length
                self.cache[:, :, new_slot, :, :n] = self.cache[:, :, s.slot, :, :n]
                s.slot = new_slot
        self.running = keep
