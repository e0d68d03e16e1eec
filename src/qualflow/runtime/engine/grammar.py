"""Constrained decoding: grammars for function calls and structured outputs (llguidance), compiled
once per (tokenizer, grammar) and matched per request, a token bitmask for each step.

- `calls`: the output is one call (or, `parallel`, several) of the given tools, each call's
  arguments valid against its tool's JSON schema: a named `tool_choice` (one tool) or `required`
  (any of them).
- `auto`: free text until the model opens a call (the family's open marker, one special token), then
  a call constrained as above, then free text again.
- `json_schema` / `json_object`: `text.format`.
Calls are written in the family's format (the ToolCallSpec's markers and payload), the JSON with the
separators the family's template writes (", " and ": ").

A request gets a `GrammarMatcher` from the compiled grammar: `fill_bitmask` before each step,
`accept` with the sampled token. With thinking on, `wake` holds the tokens that close the think
block (its end token first): the matcher lets everything through until that token, forces the rest
of `wake`, and only then constrains (the reasoning is never constrained)."""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import llguidance
import torch

from ..kernels import token_mask

# The JSON the family's template writes: no free whitespace, ", " between items, ": " after keys.
JSON_STYLE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
ANY_OBJECT = {"type": "object"}


class GrammarError(ValueError):
    """A schema or tool set that cannot be compiled (the message says why: the server's 400)."""


def _schema_grammar(schema: dict) -> str:
    """`%json{…}` of a schema in the family's JSON style."""
    if not isinstance(schema, dict):
        raise GrammarError(f"a JSON schema must be an object, got {type(schema).__name__}")
    styled = dict(schema)
    styled["x-guidance"] = {**JSON_STYLE, **schema.get("x-guidance", {})}
    return "%json " + json.dumps(styled, ensure_ascii=False)


def _call_rules(spec, tools: list[dict]) -> str:
    """Lark rules `call: call_0 | call_1 …`, each one tool's call in the family's format."""
    if not tools:
        raise GrammarError("a call grammar needs at least one tool")
    rules = []
    for i, tool in enumerate(tools):
        head = spec.payload_head(tool["name"])[len(spec.open) :]
        tail = spec.payload_tail()[: -len(spec.close)]
        args = _schema_grammar(tool.get("parameters") or ANY_OBJECT)
        rules.append(
            f"call_{i}: <[{spec.open_id}]> {json.dumps(head)} {args} {json.dumps(tail)} "
            f"<[{spec.close_id}]>"
        )
    return (
        "call: "
        + " | ".join(f"call_{i}" for i in range(len(tools)))
        + "\n"
        + "\n".join(rules)
        + "\n"
    )


def calls_lark(spec, tools: list[dict], parallel: bool) -> str:
    more = f" ({json.dumps(spec.between)} call)*" if parallel else ""
    return f"start: call{more}\n" + _call_rules(spec, tools)


def auto_lark(spec, tools: list[dict], parallel: bool) -> str:
    calls = "(call TEXT)*" if parallel else "(call TEXT)?"
    return f"start: TEXT {calls}\nTEXT: /(.|\\n)*/\n" + _call_rules(spec, tools)


def json_schema_lark(schema: dict) -> str:
    return "start: " + _schema_grammar(schema) + "\n"


@dataclass(frozen=True)
class CompiledGrammar:
    """A grammar compiled against one tokenizer; `matcher()` gives each request its own state."""

    key: tuple
    grammar: str
    vocab_size: int
    _proto: object = field(repr=False, compare=False)

    def matcher(self, wake: tuple[int, ...] = ()) -> GrammarMatcher:
        return GrammarMatcher(self._proto.deep_copy(), wake)


class GrammarMatcher:
    """One request's position in its grammar."""

    def __init__(self, matcher, wake: tuple[int, ...] = ()):
        self._m = matcher
        self._wake = tuple(wake)
        self._forced: list[int] = []  # tokens still to force after the wake token

    @property
    def dormant(self) -> bool:
        return bool(self._wake)

    def fill_bitmask(self, bitmask: torch.Tensor, row: int = 0) -> None:
        """The tokens allowed next into `bitmask[row]` (int32, CPU, one bit a token)."""
        if self.fill_own_row(bitmask, row) is not None:
            # llguidance.torch.fill_next_token_bitmask, without importing that module: its
            # torch.compile'd helper pulls in torch._dynamo, seconds of CPU in every process
            # that imports the engine
            v = _checked(bitmask)[row]
            self._m.unsafe_compute_mask_ptr(v.data_ptr(), v.numel() * v.element_size())

    def fill_own_row(self, bitmask: torch.Tensor, row: int):
        """Fill `bitmask[row]` here where it needs no grammar (thinking not yet over: everything;
        a forced token: that one) and return None; else return llguidance's matcher, whose mask
        the caller computes (`fill_bitmasks`: every such row at once)."""
        if self._wake:
            bitmask[row].fill_(-1)
        elif self._forced:
            bitmask[row].zero_()
            word, bit = divmod(self._forced[0], 32)
            bitmask[row, word] = (1 << bit) - (1 << 32 if bit == 31 else 0)  # int32 bit pattern
        else:
            return self._m
        return None

    def accept(self, token: int) -> bool:
        """Advance with the sampled token; False when the grammar does not allow it."""
        if self._wake:
            if token == self._wake[0]:
                self._forced, self._wake = list(self._wake[1:]), ()
            return True
        if self._forced:
            return self._forced.pop(0) == token
        return self._m.consume_token(token)

    @property
    def finished(self) -> bool:
        """The grammar is complete and allows nothing but a stop token."""
        return not self._wake and not self._forced and self._m.is_stopped()

    @property
    def error(self) -> str | None:
        return self._m.get_error() if self._m.is_error() else None


@functools.lru_cache(maxsize=4)
def _ll_tokenizer(tokenizer_json: str, vocab_size: int, stop_ids: tuple[int, ...]):
    """llguidance's tokenizer, built once per process for each tokenizer (1.5-2 CPU-s for a
    151,936-token vocabulary) and shared by every engine's compiler: it is immutable. Each
    compiler keeps its own grammars, so a new engine still compiles (and times) its first
    schema."""
    return llguidance.LLTokenizer(tokenizer_json, n_vocab=vocab_size, eos_token=list(stop_ids))


class GrammarCompiler:
    """Compiles grammars for one tokenizer and keeps the last `capacity` of them, keyed by the
    grammar's hash: a schema is compiled once. `tokenizer_json`: the tokenizer's JSON (its
    `to_str()`); `vocab_size`: the model's (the bitmask's width); `stop_ids`: what ends a
    request."""

    def __init__(
        self, tokenizer_json: str, vocab_size: int, stop_ids: tuple[int, ...], capacity: int = 256
    ):
        self.tokenizer = _ll_tokenizer(tokenizer_json, vocab_size, tuple(stop_ids))
        self.tokenizer_key = hashlib.sha256(tokenizer_json.encode()).hexdigest()[:16]
        self.vocab_size, self.capacity = vocab_size, capacity
        self._cache: OrderedDict[tuple, CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()
        self.compiled = 0  # grammars compiled (cache misses)

    def calls(self, spec, tools: list[dict], parallel: bool = False) -> CompiledGrammar:
        return self.lark(calls_lark(spec, tools, parallel))

    def auto(self, spec, tools: list[dict], parallel: bool = True) -> CompiledGrammar:
        return self.lark(auto_lark(spec, tools, parallel))

    def json_schema(self, schema: dict) -> CompiledGrammar:
        return self.lark(json_schema_lark(schema))

    def json_object(self) -> CompiledGrammar:
        return self.json_schema(ANY_OBJECT)

    def cached(self, lark: str) -> bool:
        """Whether `lark` is compiled already (`lark(lark)` returns at once)."""
        return self._key(lark) in self._cache

    def _key(self, lark: str) -> tuple:
        return (self.tokenizer_key, hashlib.sha256(lark.encode()).hexdigest())

    def lark(self, lark: str) -> CompiledGrammar:
        key = self._key(lark)
        with self._lock:  # the engine's compiler thread and a submitting thread share the cache
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        grammar = llguidance.LLMatcher.grammar_from_lark(lark)
        proto = llguidance.LLMatcher(self.tokenizer, grammar, log_level=0)
        if proto.is_error():
            raise GrammarError(f"the grammar does not compile: {proto.get_error()}")
        compiled = CompiledGrammar(key, lark, self.vocab_size, proto)
        with self._lock:
            self._cache[key] = compiled
            self.compiled += 1
            if len(self._cache) > self.capacity:
                self._cache.popitem(last=False)
        return compiled


def _checked(bitmask: torch.Tensor) -> torch.Tensor:
    if bitmask.dtype != torch.int32 or not bitmask.is_cpu or not bitmask.is_contiguous():
        raise ValueError("the bitmask must be a contiguous int32 CPU tensor")
    return bitmask


@functools.lru_cache(maxsize=1)
def _executor():
    """llguidance's thread pool for masks, one per process (its default size: 80 % of the CPUs,
    at most 32)."""
    return llguidance.LLExecutor()


def fill_bitmasks(rows: list[tuple[GrammarMatcher, int]], bitmask: torch.Tensor) -> None:
    """Each (matcher, row)'s allowed tokens into `bitmask` (rows x words, int32, CPU): the rows
    that need their grammar computed at once, on llguidance's threads, outside the GIL (one mask
    of a 151,936-token vocabulary takes 0.1-0.3 ms: a batch of 32 one after the other took longer
    than the GPU's decode step)."""
    native = [(m, row) for g, row in rows if (m := g.fill_own_row(bitmask, row)) is not None]
    if native:
        b = _checked(bitmask)
        _executor().unsafe_compute_mask_ptr(native, b.data_ptr(), b.shape[1] * 4, b.shape[0])


def allocate_bitmask(batch: int, vocab_size: int, pinned: bool = False) -> torch.Tensor:
    """A CPU int32 bitmask for `batch` rows (every token allowed); `pinned`: in page-locked memory,
    for a GPU's logits (its copy is then queued behind the step's forward instead of waiting for
    it; torch's host allocator keeps the buffer until that copy has run)."""
    return torch.full((batch, (vocab_size + 31) // 32), -1, dtype=torch.int32, pin_memory=pinned)


def apply_bitmask(
    logits: torch.Tensor, bitmask: torch.Tensor, rows: list[int] | None = None
) -> torch.Tensor:
    """Set the logits of disallowed tokens to -inf in place: row `rows[i]` of `logits` (rows x
    vocab, any device) by `bitmask[i]` (every row in order when `rows` is None); the other rows
    are not touched. On a GPU, a pinned `bitmask` is copied on a stream of its own, beside the
    step's forward, and one kernel masks (kernels.token_mask): nothing here waits for the device.
    A pageable one makes the copy wait for everything queued before it (the step's whole forward),
    which ends the overlap of host and device for that step."""
    rows = list(range(bitmask.shape[0])) if rows is None else rows
    if len(rows) != bitmask.shape[0]:
        raise ValueError(f"{len(rows)} rows for a bitmask of {bitmask.shape[0]}")
    index = torch.tensor(rows, dtype=torch.int32, pin_memory=bitmask.is_pinned())
    if logits.is_cuda:
        bitmask, index = _to_device(logits.device, bitmask, index)
    token_mask.apply(logits, bitmask, index)
    return logits


@functools.lru_cache(maxsize=8)
def _copy_stream(device: torch.device) -> torch.cuda.Stream:
    return torch.cuda.Stream(device)


def _to_device(device: torch.device, *host: torch.Tensor) -> list[torch.Tensor]:
    """`host` tensors on `device`, copied on a side stream (pinned: beside the work queued on the
    current stream, which waits for the copies only)."""
    main, side = torch.cuda.current_stream(device), _copy_stream(device)
    with torch.cuda.stream(side):
        out = [t.to(device, non_blocking=t.is_pinned()) for t in host]
    main.wait_stream(side)
    for t in out:  # allocated on the side stream, used on the current one
        t.record_stream(main)
    return out
