"""The agent-replay point of `qualflow bench engine`: the recorded agent sessions of the
`agent-replay` workload (workloads/agent/agent-v1.json: Responses payloads with tools, calls and
tool outputs, one per turn) rendered through the family's chat template and replayed on the Task,
each session's turns one after the other, --agent-concurrency sessions at once, with the prefix
cache on and then off on the same bundle. Each turn's prompt is the recorded one (the outputs,
greedy on seeded random weights, are not fed back), so the trace fixes what a cache can hold: a
prompt's longest common token prefix with any prompt sent before it. Per side it records output
throughput, TTFT p50, the prefill steps' paths, and the cache's hit rate (cached tokens over prompt
tokens) beside the trace's maximum. On --tiny only the first sessions run and the figures
mean nothing."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path

import numpy as np

from qualflow.runtime import GenerationRequest, SamplingParams

from .step_log import StepLog

TINY_SESSIONS = 2


def load_sessions(path: Path) -> list[list[dict]]:
    """Each session's payloads, in file order (AIPerf's inputs_json: {"data": [{"payloads"}]})."""
    try:
        data = json.loads(path.read_text())["data"]
        return [s["payloads"] for s in data]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not an inputs_json file of sessions ({e})") from e


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    diff = np.nonzero(np.asarray(a[:n]) != np.asarray(b[:n]))[0]
    return int(diff[0]) if len(diff) else n


def replay(task, prompts: list[list[list[int]]], concurrency: int, out: int, tag: str) -> dict:
    """Every session's turns in order, `concurrency` sessions at once: per request (in sending
    order) its prompt, cached tokens and TTFT (ms); and the wall time."""
    params = SamplingParams(max_new_tokens=out, temperature=0.0, ignore_eos=True)
    sent: list[dict] = []

    async def one_session(i: int, turns: list[list[int]], gate: asyncio.Semaphore) -> None:
        async with gate:
            for j, ids in enumerate(turns):
                rec = {"session": i, "turn": j, "prompt": ids}
                sent.append(rec)
                req = GenerationRequest(f"{tag}{i}-{j}", ids, params)
                final = [ev async for ev in task.generate(req)][-1]
                if final.finish_reason != "length":
                    raise RuntimeError(f"session {i} turn {j}: {final.finish_reason}")
                t = final.timing
                rec["cached_tokens"] = t.cached_tokens
                rec["ttft_ms"] = (t.first_token_ns - t.submitted_ns) / 1e6

    async def main() -> None:
        gate = asyncio.Semaphore(concurrency)
        await asyncio.gather(*[one_session(i, s, gate) for i, s in enumerate(prompts)])

    t0 = time.perf_counter()
    asyncio.run(main())
    return {"requests": sent, "wall_s": time.perf_counter() - t0}


def side_figures(res: dict, out: int) -> dict:
    reqs = res["requests"]
    seen: list[list[int]] = []
    held = 0
    for r in reqs:  # the trace's maximum: what prompts sent before this one already hold
        held += max((common_prefix(r["prompt"], s) for s in seen), default=0)
        seen.append(r["prompt"])
    prompt = sum(len(r["prompt"]) for r in reqs)
    cached = sum(r["cached_tokens"] for r in reqs)
    return {
        "requests": len(reqs),
        "wall_s": res["wall_s"],
        "output_tok_per_s": len(reqs) * out / res["wall_s"],
        "requests_per_s": len(reqs) / res["wall_s"],
        "ttft_ms_p50": statistics.median(r["ttft_ms"] for r in reqs),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "hit_rate": cached / prompt,
        "max_hit_rate": held / prompt,
        "hit_share_of_max": cached / held if held else None,
    }


def measure_agent_replay(run) -> dict:
    """Both sides on `run` (engine.Run), each on its own load; the record is also in
    run.result["agent_replay"]."""
    cfg = run.cfg
    sessions = load_sessions(Path(cfg.agent_trace))
    sessions = sessions[:TINY_SESSIONS] if cfg.tiny else sessions
    out = 4 if cfg.tiny else 64
    rec: dict = {"trace": cfg.agent_trace, "sessions": len(sessions), "output_tokens": out}
    rec["concurrency"] = cfg.agent_concurrency
    for side, on in (("on", True), ("off", False)):
        task = run.load(prefix_caching=on, prefill_graphs="on", max_context=4096)
        try:
            prompts = [
                [
                    task.render_prompt(p.get("instructions"), p["input"], tools=p.get("tools"))
                    for p in s
                ]
                for s in sessions
            ]
            if not cfg.tiny:  # warm: one token ahead of each prompt, so that none of it is cached
                warm = [[[1] + t for t in s] for s in prompts[:2]]
                replay(task, warm, cfg.agent_concurrency, 2, "w")
            log = StepLog(task, watch_all=True)
            res = replay(task, prompts, cfg.agent_concurrency, out, "a")
        finally:
            run.release(task)
        rec[side] = side_figures(res, out) | {"prefill_paths": dict(log.paths)}
    rec["throughput_ratio_on_off"] = rec["on"]["output_tok_per_s"] / rec["off"]["output_tok_per_s"]
    run.result["agent_replay"] = rec
    run.save()
    on, off = rec["on"], rec["off"]
    print(
        f"agent-replay: {rec['sessions']} sessions, {on['requests']} turns at c"
        f"{rec['concurrency']}: {on['output_tok_per_s']:.0f} tok/s prefix cache on, "
        f"{off['output_tok_per_s']:.0f} off ({rec['throughput_ratio_on_off']:.2f}x); TTFT p50 "
        f"{on['ttft_ms_p50']:.1f} / {off['ttft_ms_p50']:.1f} ms; hit rate {on['hit_rate']:.1%} of "
        f"a maximum {on['max_hit_rate']:.1%} ({on['hit_share_of_max']:.1%}); prefill steps on "
        f"{on['prefill_paths']}",
        flush=True,
    )
    return rec
