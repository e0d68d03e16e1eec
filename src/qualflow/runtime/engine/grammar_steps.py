"""Constrained decoding in the engine loop, behind one object, as `ThinkSteps` is thinking.
`GrammarSteps` holds the engine's one `GrammarCompiler` and the live sequences with a grammar. The
compiler is built on its own thread when the first constrained request comes (building llguidance's
tokenizer takes 1.5-2 CPU-seconds for a 151,936-token vocabulary; that request waits for it, the
engine does not): an engine that never sees a tool or a schema never pays for it. At submission a
request's `GrammarSpec` becomes the sequence's matcher: at once when its grammar is cached;
otherwise the compiler's thread compiles it and only then puts the sequence into the engine's inbox
(`attach_grammar`), so a compile blocks neither the thread that submits (the server's event loop,
with the engine in process) nor the engine's steps; until then the sequence is `compiling` (a cancel
finds it there). At launch, after the step's forward is queued and before its sampling, `mask`
brings each constrained row's matcher up to date (the token the step before sampled is read back
first: that step ran ahead of this one on the device, so the wait is for it only, while this step's
forward runs), fills the rows' bitmask on the host (all rows at once, on llguidance's threads) and
applies it to the logits. A step with no constrained row touches no mask: requests without grammar
pay nothing."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..api.grammar import GrammarSpec
from .grammar import (
    ANY_OBJECT,
    GrammarCompiler,
    GrammarMatcher,
    allocate_bitmask,
    apply_bitmask,
    auto_lark,
    calls_lark,
    fill_bitmasks,
    json_schema_lark,
)
from .sequence import PLACEHOLDER, Sequence

log = logging.getLogger("qualflow.engine")
# How often an idle engine with a feed (an engine process's pipe) looks at its inbox while a grammar
# compiles: the compiled sequence comes by the inbox, which the feed's wait does not watch.
COMPILE_POLL_S = 0.002


@dataclass(frozen=True)
class GrammarSetup:
    """What the engine's compiler is built from: the tokenizer's JSON, the model's vocabulary size
    (the bitmask's width), the stop ids, the family's tool-call format (None: no tools) and the
    tokens that close a think block, its end token first (a thinking request's output is
    constrained only after them)."""

    tokenizer_json: str
    vocab_size: int
    stop_ids: tuple[int, ...]
    tool_calls: object | None
    wake: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Refused:
    """An inbox entry: the sequence's grammar could not be had (it ends with this error)."""

    seq: Sequence
    why: str


@dataclass(eq=False, slots=True)
class GrammarState:
    matcher: GrammarMatcher
    accepted: int = 0  # output tokens the matcher has taken
    broken: str | None = None  # why the matcher stopped constraining (a token it refused)


class GrammarSteps:
    def __init__(self, setup: GrammarSetup):
        self.setup = setup
        self.live: set[Sequence] = set()
        self._compiler: GrammarCompiler | None = None
        self._failure: str | None = None
        self._built = threading.Event()
        self._building = self._closed = False  # under _lock: the build began; close() was called
        self._work: queue.SimpleQueue = queue.SimpleQueue()  # (seq, admit) to compile
        self._compiling: dict[str, list[Sequence]] = {}  # by request id, until the engine takes it
        self._lock = threading.Lock()
        threading.Thread(target=self._serve, name="qualflow-grammar", daemon=True).start()

    def _serve(self) -> None:
        """The compiler's thread: compile what `attach` hands over, building the compiler first
        when the first of it comes."""
        while True:
            seq, admit = self._work.get()
            if not self._built.is_set():
                self._build()
            item = _attached(self, seq)
            if isinstance(item, Refused):
                self.forget(seq)  # the engine does not take it
            admit(item)

    def _build(self) -> None:
        with self._lock:
            if self._closed:
                self._failure = "the engine is closing"
            self._building = not self._closed
        if self._building:
            s = self.setup
            try:
                self._compiler = GrammarCompiler(s.tokenizer_json, s.vocab_size, s.stop_ids)
            except Exception as e:  # noqa: BLE001 - reported to each constrained request
                self._failure = f"{type(e).__name__}: {e}"
        self._built.set()

    def attach(self, seq: Sequence, admit: Callable[[object], None]) -> None:
        """Give `seq` its matcher and `admit` it (or a Refused): here when its grammar is cached,
        else on the compiler's thread (any thread may call this)."""
        if self._built.is_set() and self._cached(seq.req.grammar):
            admit(_attached(self, seq))
            return
        with self._lock:
            self._compiling.setdefault(seq.req.request_id, []).append(seq)
        self._work.put((seq, admit))

    def compiling(self, request_id: str) -> list[Sequence]:
        """The sequences of `request_id` handed to the compiler and not taken by the engine yet."""
        with self._lock:
            return list(self._compiling.get(request_id, ()))

    def busy(self) -> bool:
        """A sequence is still compiling (the engine must not wait on its feed alone)."""
        return bool(self._compiling)

    def take(self, seq: Sequence) -> bool:
        """The engine takes `seq` from its inbox (engine thread): whether it is to run (not ended
        meanwhile, e.g. cancelled while its grammar compiled)."""
        self.forget(seq)
        if seq.done:
            return False
        self.live.add(seq)
        return True

    def forget(self, seq: Sequence) -> None:
        """`seq` is no longer compiling (the engine took it, or it was refused)."""
        with self._lock:
            seqs = self._compiling.get(seq.req.request_id, [])
            if seq in seqs:
                seqs.remove(seq)
                if not seqs:
                    del self._compiling[seq.req.request_id]

    def _cached(self, spec: GrammarSpec) -> bool:
        """Whether `spec` needs no compile (its grammar is cached, or it is refused outright)."""
        if spec.kind in ("calls", "auto") and self.setup.tool_calls is None:
            return True
        return self._compiler is not None and self._compiler.cached(self._lark(spec))

    def _lark(self, spec: GrammarSpec) -> str:
        calls, tools = self.setup.tool_calls, list(spec.tools)
        if spec.kind == "calls":
            return calls_lark(calls, tools, spec.parallel)
        if spec.kind == "auto":
            return auto_lark(calls, tools, spec.parallel)
        return json_schema_lark((spec.schema or {}) if spec.kind == "json_schema" else ANY_OBJECT)

    @property
    def built(self) -> bool:
        """Whether the compiler was built (or its build failed): by the first constrained
        request."""
        return self._built.is_set()

    def close(self, timeout: float = 60) -> None:
        """Wait for a compiler build that began to end, and begin none after: a process that
        exits while the build thread is inside llguidance can crash at finalization (the thread,
        woken after the interpreter is gone, unwinds through llguidance's native frames)."""
        with self._lock:
            self._closed, building = True, self._building
        if building:
            self._built.wait(timeout)

    @property
    def compiler(self) -> GrammarCompiler:
        self._built.wait()
        if self._compiler is None:
            raise RuntimeError(f"the grammar compiler could not be built: {self._failure}")
        return self._compiler

    def state(self, spec: GrammarSpec, thinking: bool) -> GrammarState:
        """A new request's matcher (raises ValueError / GrammarError when it cannot compile)."""
        c = self.compiler
        if spec.kind in ("calls", "auto") and self.setup.tool_calls is None:
            raise ValueError("this engine's family declares no tool-call format")
        compiled = c.lark(self._lark(spec))
        return GrammarState(compiled.matcher(self.setup.wake if thinking else ()))

    def drop(self, seq: Sequence) -> None:
        self.live.discard(seq)

    def mask(self, sampling: list[Sequence], logits: torch.Tensor, before) -> None:
        """Mask the logits of this step's constrained rows (`before`: the step launched before this
        one, whose tokens some rows' matchers still need; None when it was read back)."""
        if not self.live:
            return
        rows = [r for r, s in enumerate(sampling) if s in self.live and s.grammar.broken is None]
        if not rows:
            return
        pending = None
        for row in rows:
            s = sampling[row]
            if s.token_ids and s.token_ids[-1] == PLACEHOLDER and pending is None:
                pending = _read_back(before)
            self._catch_up(s, pending)
        rows = [r for r in rows if sampling[r].grammar.broken is None]
        if not rows:
            return
        # one mask row a constrained row; pinned for a GPU's logits: its copy runs beside this
        # step's forward, not after it (a pageable copy waits for the forward: no overlap)
        bitmask = allocate_bitmask(len(rows), self.setup.vocab_size, logits.is_cuda)
        ready = [(sampling[r].grammar.matcher, i) for i, r in enumerate(rows)]
        fill_bitmasks(ready, bitmask)  # the rows' masks at once, on llguidance's threads
        apply_bitmask(logits, bitmask, rows)

    def _catch_up(self, s: Sequence, pending: dict | None) -> None:
        g = s.grammar
        start = len(s.req.prompt_token_ids)
        new = s.token_ids[start + g.accepted :]
        for t in new:
            if t == PLACEHOLDER:
                t = pending[id(s)]
            if not g.matcher.accept(t):
                g.broken = f"token {t} is outside the grammar ({g.matcher.error or 'refused'})"
                log.warning("request %s: %s", s.req.request_id, g.broken)
                return
            g.accepted += 1


def _read_back(flight) -> dict:
    """The tokens of a launched step, by sequence (waiting for that step only)."""
    if flight is None:
        return {}
    if flight.ready is not None:
        flight.ready.synchronize()
    toks = flight.host_tokens.tolist()
    return {id(s): t for s, t in zip(flight.seqs, toks)}


def attach_grammar(steps: GrammarSteps | None, seq: Sequence, admit: Callable) -> None:
    """At submission: `admit` `seq` once it has its request's matcher, or a Refused when it
    cannot have one (the request then ends with that error; the engine keeps serving)."""
    if steps is None:
        admit(Refused(seq, "grammar: ValueError: this engine does not constrain decoding"))
    else:
        steps.attach(seq, admit)


def _attached(steps: GrammarSteps, seq: Sequence) -> Sequence | Refused:
    try:
        seq.grammar = steps.state(seq.req.grammar, seq.think is not None)
        return seq
    except Exception as e:  # noqa: BLE001 - the request's error
        return Refused(seq, f"grammar: {type(e).__name__}: {e}")


def grammar_setup(bundle, family) -> GrammarSetup:
    """The engine's grammar setup from its bundle and family: the tool-call format only where the
    bundle's tokenizer carries its markers; a thinking request's output constrained from its
    end-think token on."""
    tool_calls = getattr(family, "tool_calls", None)
    if tool_calls is not None and tool_calls.tokenizer_mismatch(bundle.tokenizer.id_to_token):
        tool_calls = None
    reasoning = getattr(family, "reasoning", None)
    wake = ()
    if reasoning is not None:
        close = tuple(reasoning.close_ids)
        wake = close[close.index(reasoning.end_id) :]
    return GrammarSetup(
        bundle.tokenizer.to_str(),
        int(bundle.config["vocab_size"]),
        tuple(family.stop_token_ids(bundle.generation_config)),
        tool_calls,
        wake,
    )
