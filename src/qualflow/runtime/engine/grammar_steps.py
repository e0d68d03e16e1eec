"""Constrained decoding in the engine loop, behind one object, as `ThinkSteps` is thinking.
`GrammarSteps` holds the engine's one `GrammarCompiler` (built at startup on a background thread:
building llguidance's tokenizer takes seconds; the first constrained request waits for it) and the
live sequences with a grammar. At submission a request's `GrammarSpec` is compiled (cached per
grammar) into the sequence's matcher. At launch, after the step's forward is queued and before its
sampling, `mask` brings each constrained row's matcher up to date (the token the step before sampled
is read back first: that step ran ahead of this one on the device, so the wait is for it only, while
this step's forward runs), fills the rows' bitmask on the host and applies it to the logits. A step
with no constrained row touches no mask: requests without grammar pay nothing."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import torch

from ..api.grammar import GrammarSpec
from .grammar import GrammarCompiler, GrammarMatcher, allocate_bitmask, apply_bitmask
from .sequence import PLACEHOLDER, Sequence

log = logging.getLogger("qualflow.engine")


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
        threading.Thread(target=self._build, name="qualflow-grammar", daemon=True).start()

    def _build(self) -> None:
        s = self.setup
        try:
            self._compiler = GrammarCompiler(s.tokenizer_json, s.vocab_size, s.stop_ids)
        except Exception as e:  # noqa: BLE001 - reported to each constrained request
            self._failure = f"{type(e).__name__}: {e}"
        self._built.set()

    def close(self, timeout: float = 60) -> None:
        """Wait for the compiler's build to end: a process that exits while the build thread is
        inside llguidance can crash at finalization (the thread, woken after the interpreter is
        gone, unwinds through llguidance's native frames)."""
        self._built.wait(timeout)

    @property
    def compiler(self) -> GrammarCompiler:
        self._built.wait()
        if self._compiler is None:
            raise RuntimeError(f"the grammar compiler could not be built: {self._failure}")
        return self._compiler

    def state(self, spec: GrammarSpec, thinking: bool) -> GrammarState:
        """A new request's matcher (raises ValueError / GrammarError when it cannot compile)."""
        c, calls = self.compiler, self.setup.tool_calls
        if spec.kind in ("calls", "auto") and calls is None:
            raise ValueError("this engine's family declares no tool-call format")
        if spec.kind == "calls":
            compiled = c.calls(calls, list(spec.tools), spec.parallel)
        elif spec.kind == "auto":
            compiled = c.auto(calls, list(spec.tools), spec.parallel)
        elif spec.kind == "json_schema":
            compiled = c.json_schema(spec.schema or {})
        else:
            compiled = c.json_object()
        return GrammarState(compiled.matcher(self.setup.wake if thinking else ()))

    def add(self, seq: Sequence) -> None:
        if seq.grammar is not None:
            self.live.add(seq)

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
        bitmask = allocate_bitmask(len(sampling), self.setup.vocab_size)
        for row in rows:
            s = sampling[row]
            if s.token_ids and s.token_ids[-1] == PLACEHOLDER and pending is None:
                pending = _read_back(before)
            self._catch_up(s, pending)
            if s.grammar.broken is None:
                s.grammar.matcher.fill_bitmask(bitmask, row)
        apply_bitmask(logits, bitmask)

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


def attach_grammar(steps: GrammarSteps | None, seq: Sequence) -> str | None:
    """Give `seq` its request's matcher (at submission); why not, when it cannot have one (the
    request then ends with that error; the engine keeps serving)."""
    try:
        if steps is None:
            raise ValueError("this engine does not constrain decoding")
        seq.grammar = steps.state(seq.req.grammar, seq.think is not None)
        return None
    except Exception as e:  # noqa: BLE001 - the request's error
        return f"grammar: {type(e).__name__}: {e}"


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
