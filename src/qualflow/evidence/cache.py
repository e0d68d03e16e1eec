"""The prefix cache in the evidence: per request, the trace's own maximum (the share of its prompt
that an earlier request of the point already sent) and the cached tokens the server recorded; per
point, the hit rate (ours and AIPerf's) beside that maximum.

The maximum is measured on the exact payloads (AIPerf's inputs.json), in characters of the prompt's
serialized parts (tools, instructions, then each input item, one JSON line each): a prompt's prefix
is a prefix of that text, so the longest common prefix with any earlier request's text is what a
perfect prefix cache could hold of it (up to the tokenizer's granularity)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd


def prompt_text(payload: dict) -> str:
    """The prompt's parts in the order a chat template renders them, one JSON line each."""
    parts = [payload.get("tools") or [], payload.get("instructions") or ""]
    inp = payload.get("input")
    parts += inp if isinstance(inp, list) else [inp or ""]
    return "\n".join(json.dumps(p, sort_keys=True) for p in parts)


def max_cached_shares(payloads: dict[tuple[str, int], dict]) -> dict[tuple[str, int], float]:
    """(session, turn) -> the share of that request's prompt that an earlier request already sent,
    in sending order (each session's turns in order; sessions in file order). AIPerf interleaves
    sessions, so counting all earlier-listed requests is the bound for a cache that keeps all."""
    seen: list[str] = []
    out = {}
    for key, payload in payloads.items():
        text = prompt_text(payload)
        held = max((len(os.path.commonprefix([text, s])) for s in seen), default=0)
        out[key] = held / len(text) if text else 0.0
        seen.append(text)
    return out


def cached_tokens_by_request(timing_log: str | Path) -> dict[str, int]:
    """request id -> cached_tokens from the server's timing JSONL (the records that carry one)."""
    path = Path(timing_log)
    out: dict[str, int] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and rec.get("cached_tokens") is not None:
            out[rec.get("request_id")] = rec["cached_tokens"]
    return out


def _ratio(num: pd.Series, den: pd.Series) -> float | None:
    ok = num.notna() & den.notna()
    total = float(den[ok].sum())
    return float(num[ok].sum()) / total if ok.any() and total > 0 else None


def cache_figures(samples: pd.DataFrame, summary_json: dict | None) -> dict:
    """A point's hit rate (ours, over its samples; AIPerf's, from its summary) and the trace's
    maximum hit rate (max_cached_share weighted by prompt tokens)."""

    def col(c):
        return (
            pd.to_numeric(samples[c], errors="coerce") if c in samples else pd.Series(dtype=float)
        )

    tokens = col("server_input_tokens").fillna(col("client_isl"))
    pct = ((summary_json or {}).get("overall_usage_prompt_cache_read_pct") or {}).get("avg")
    return {
        "cache_hit_rate": _ratio(col("server_cached_tokens"), col("server_input_tokens")),
        "aiperf_cache_hit_rate": None if pct is None else pct / 100.0,
        "max_cache_hit_rate": _ratio(col("max_cached_share") * tokens, tokens),
    }
