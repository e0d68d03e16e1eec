"""Grammar compile and mask latency with the embedded default's tokenizer (CPU):

  PYTHONPATH=src python benchmarks/grammar_speed.py [--repeats 20]

Prints, per grammar kind, the p50 of: the first compile of a new schema (cache miss, a fresh tool
name each repeat), the cached lookup (hit), a matcher for a request, and one mask fill (the first
step). The
tokenizer's one-time import (per process) is printed on its own."""

from __future__ import annotations

import argparse
import statistics
import time

from qualflow.families import get_family
from qualflow.families.qwen3.synthetic import tokenizer_json
from qualflow.runtime.engine.grammar import GrammarCompiler, allocate_bitmask

VOCAB, STOPS = 151936, (151643, 151645)
PARAMS = {
    "type": "object",
    "additionalProperties": False,
    "required": ["city", "days"],
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "unit": {"enum": ["c", "f"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}


def _ms(f) -> tuple[float, object]:
    t = time.perf_counter()
    out = f()
    return (time.perf_counter() - t) * 1e3, out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    repeats = ap.parse_args(argv).repeats
    spec = get_family("qwen3").tool_calls
    text = tokenizer_json()
    setup, compiler = _ms(lambda: GrammarCompiler(text, VOCAB, STOPS))
    print(f"tokenizer import: {setup:.0f} ms (once per process)")
    kinds = {
        "named call": lambda i: compiler.calls(spec, [{"name": f"f{i}", "parameters": PARAMS}]),
        "required (3 tools)": lambda i: compiler.calls(
            spec, [{"name": f"f{i}_{k}", "parameters": PARAMS} for k in range(3)], parallel=True
        ),
        "auto (3 tools)": lambda i: compiler.auto(
            spec, [{"name": f"g{i}_{k}", "parameters": PARAMS} for k in range(3)]
        ),
        "json_schema": lambda i: compiler.json_schema(dict(PARAMS, title=f"s{i}")),
    }
    bitmask = allocate_bitmask(1, VOCAB)
    print(
        f"{'grammar':<20}{'first compile':>15}{'cached':>10}{'matcher':>10}{'mask fill':>11}"
        f"  (p50 ms, n={repeats})"
    )
    for name, make in kinds.items():
        first, cached, matcher, fill = [], [], [], []
        for i in range(repeats):
            ms, grammar = _ms(lambda make=make, i=i: make(i))
            first.append(ms)
            cached.append(_ms(lambda make=make, i=i: make(i))[0])
            ms, m = _ms(grammar.matcher)
            matcher.append(ms)
            fill.append(_ms(lambda m=m: m.fill_bitmask(bitmask))[0])
        p50 = [statistics.median(x) for x in (first, cached, matcher, fill)]
        print(f"{name:<20}{p50[0]:>15.3f}{p50[1]:>10.3f}{p50[2]:>10.3f}{p50[3]:>11.3f}")


if __name__ == "__main__":
    main()
