"""The requests of the constrained-decoding benchmark (constrained.py): groups of requests run at
once through the Task, each group with its own concurrency and grammar (None: unconstrained), with
per-group throughput, per-request decode rate and ITL; and a count of the constrained requests whose
grammar broke (a token outside it: from then on that request ran unconstrained, so a figure with
breaks understates the constraint's cost).

The grammars are those of the pilot's `chat-tools-required` workload: `tool_choice: required` over
its two `strict: true` functions (bounded arguments: a call is ~25 tokens; with ignore_eos the rest
of the output is masked to the stop token), and `free`: one strict function whose only argument is
an unbounded string, so that every output token is masked inside a JSON string (the worst case)."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass

import numpy as np

from qualflow.runtime import GenerationRequest, GrammarSpec

from .point import one_request

WEATHER = {
    "type": "object",
    "additionalProperties": False,
    "required": ["city", "days"],
    "properties": {
        "city": {"type": "string", "enum": ["Paris", "Oslo", "Lima", "Tokyo"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
}
TIME = {
    "type": "object",
    "additionalProperties": False,
    "required": ["zone"],
    "properties": {"zone": {"type": "string", "enum": ["UTC", "CET", "JST"]}},
}
FREE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["query"],
    "properties": {"query": {"type": "string"}},
}
PILOT_TOOLS = (
    {"type": "function", "name": "get_weather", "strict": True, "parameters": WEATHER},
    {"type": "function", "name": "get_time", "strict": True, "parameters": TIME},
)


def required(tools=PILOT_TOOLS) -> GrammarSpec:
    """`tool_choice: required` over `tools`, parallel calls allowed (the server's grammar_for)."""
    return GrammarSpec("calls", tuple(tools), True)


def one_tool(name: str, parameters: dict) -> GrammarSpec:
    """A named `tool_choice` of one strict function."""
    return required(({"type": "function", "name": name, "strict": True, "parameters": parameters},))


def free_call(name: str = "search") -> GrammarSpec:
    return one_tool(name, FREE)


@dataclass(frozen=True)
class Group:
    name: str
    concurrency: int
    requests: int
    grammar: GrammarSpec | None = None


class GrammarBreaks(logging.Handler):
    """Counts the engine's 'outside the grammar' warnings while installed (an in-process engine)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "outside the grammar" in record.getMessage():
            self.count += 1

    def __enter__(self) -> GrammarBreaks:
        logging.getLogger("qualflow.engine").addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger("qualflow.engine").removeHandler(self)


def _stats(res: list[dict], wall: float) -> dict:
    itl = np.concatenate([r["itl_ms"] for r in res]) if res else np.array([])
    rates = [(len(r["itl_ms"])) / (r["itl_ms"].sum() / 1e3) for r in res if r["itl_ms"].sum() > 0]
    tokens = sum(r["tokens"] for r in res)
    return {
        "requests": len(res),
        "output_tokens": tokens,
        "wall_s": wall,
        "output_tok_per_s": tokens / wall,
        "request_tok_per_s_p50": float(np.median(rates)) if rates else float("nan"),
        "ttft_ms_p50": float(np.median([r["ttft_ms"] for r in res])),
        "itl_ms_p50": float(np.percentile(itl, 50)) if len(itl) else float("nan"),
    }


async def run_groups(task, groups: list[Group], isl: int, osl: int, seed: int = 0) -> dict:
    """Every group's requests at once (each group within its own concurrency): per group, its
    figures over its own wall time (first submission to its last request's end)."""
    rng = random.Random(seed)
    t0 = time.perf_counter()

    async def group(g: Group) -> dict:
        sem = asyncio.Semaphore(g.concurrency)
        ends: list[float] = []

        async def one(i: int) -> dict:
            ids = [rng.randrange(1000, 100_000) for _ in range(isl)]
            params = task.default_params(max_new_tokens=osl, temperature=0.0, ignore_eos=True)
            req = GenerationRequest(f"{g.name}-{seed}-{i}", ids, params, grammar=g.grammar)
            async with sem:
                r = await one_request(task, req)
            ends.append(time.perf_counter())
            return r

        res = await asyncio.gather(*[one(i) for i in range(g.requests)])
        bad = [r["reason"] for r in res if r["reason"] != "length"]
        if bad:
            raise RuntimeError(f"group {g.name}: requests did not run to length: {bad[:3]}")
        return _stats(res, max(ends) - t0)

    figs = await asyncio.gather(*[group(g) for g in groups])
    return {g.name: f for g, f in zip(groups, figs)}


async def first_token_ms(task, grammar: GrammarSpec | None, isl: int, osl: int, seed: int) -> float:
    """One c1 request's TTFT (ms): submission, with its grammar's compile or cache lookup, to its
    first token."""
    rng = random.Random(seed)
    ids = [rng.randrange(1000, 100_000) for _ in range(isl)]
    params = task.default_params(max_new_tokens=osl, temperature=0.0, ignore_eos=True)
    r = await one_request(task, GenerationRequest(f"ttft-{seed}", ids, params, grammar=grammar))
    return r["ttft_ms"]
