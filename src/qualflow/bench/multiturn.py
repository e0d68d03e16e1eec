"""The multi-turn point of `qualflow bench engine`: sessions whose every turn re-sends the whole
history (the previous prompt, its greedy output, a new user part of seeded random tokens), run one
turn after the other, on four loads of the same bundle: the prefix cache on (the cached turn's
prefill step replays a graph padded to its token and context buckets, its attention reading the
context through the extend kernel where it was chosen), on with those steps eager
(--prefill-graph-context 0), on with the context gathered for the varlen kernel (--extend-attention
gather, the path before the kernel), and off. It records the last turn's TTFT (submission
to first token, on the Task) per session and the median of each side, the tokens the cache served,
the path and time of the last turn's prefill step (step_log.py), and prints the ratios to off. On
--tiny the sessions are small and the figures mean nothing (the padded steps run eagerly); on a GPU
they reach past 4k tokens."""

from __future__ import annotations

import statistics

import torch

from qualflow.runtime import GenerationRequest, SamplingParams

from .step_log import StepLog, step_summary

TURNS = 6
SESSIONS = 3
# each side's engine overrides; prefill graphs "on" (auto on cuda) so that cpu pads the steps too
SIDES = (
    ("on", dict(prefix_caching=True, prefill_graphs="on")),
    ("on_eager", dict(prefix_caching=True, prefill_graphs="on", prefill_graph_context=0)),
    ("on_gather", dict(prefix_caching=True, prefill_graphs="on", extend_attention="gather")),
    ("off", dict(prefix_caching=False, prefill_graphs="on")),
)


def sizes(tiny: bool) -> tuple[int, int, int]:
    """(first prompt, new tokens per later turn, output tokens per turn)."""
    return (64, 24, 8) if tiny else (1536, 512, 64)


def session(task, seed: int, tiny: bool, log: StepLog | None = None) -> dict:
    """One session, turn after turn: its last turn's prompt length, TTFT (ms), cached tokens and
    prefill steps (`log`)."""
    first, per_turn, out = sizes(tiny)
    gen = torch.Generator().manual_seed(seed)
    new = lambda n: torch.randint(1000, 30000, (n,), generator=gen).tolist()  # noqa: E731
    prompt, final = new(first), None
    params = SamplingParams(max_new_tokens=out, temperature=0.0, ignore_eos=True)
    for turn in range(TURNS):
        if turn:
            prompt = prompt + final.token_ids + new(per_turn)
        rid = f"mt{seed}-{turn}"
        if log is not None and turn == TURNS - 1:
            log.watch.add(rid)
        final = task.generate_sync(GenerationRequest(rid, prompt, params))
        if final.finish_reason != "length":
            raise RuntimeError(f"turn {turn}: {final.finish_reason} {final.error}")
    t = final.timing
    return {
        "prompt_tokens": len(prompt),
        "ttft_ms": (t.first_token_ns - t.submitted_ns) / 1e6,
        "cached_tokens": t.cached_tokens,
        "steps": [] if log is None else log.of(final.request_id),
    }


def measure_multiturn(run) -> dict:
    """Every side on `run` (engine.Run), each on its own load; the record is also in
    run.result["multiturn"]."""
    first, per_turn, out = sizes(run.cfg.tiny)
    context = first + (TURNS - 1) * (per_turn + out) + out
    rec: dict = {"turns": TURNS, "sessions": SESSIONS}
    for side, overrides in SIDES:
        task = run.load(**overrides, max_context=context)
        try:
            extend = task.info.get("extend_attention")
            session(task, 10_000, run.cfg.tiny)  # warm: shapes compiled, not measured
            log = StepLog(task)
            last = [session(task, s, run.cfg.tiny, log) for s in range(SESSIONS)]
        finally:
            run.release(task)
        rec[side] = {
            "engine": overrides,
            "extend_attention": extend,
            "last_turn": last,
            "ttft_ms_p50": statistics.median(x["ttft_ms"] for x in last),
            "last_prefill": step_summary([st for x in last for st in x["steps"]]),
        }
    rec["prompt_tokens"] = rec["on"]["last_turn"][0]["prompt_tokens"]
    rec["ttft_ratio_on_off"] = rec["on"]["ttft_ms_p50"] / rec["off"]["ttft_ms_p50"]
    for side in ("on_eager", "on_gather"):
        rec[f"ttft_ratio_{side}_off"] = rec[side]["ttft_ms_p50"] / rec["off"]["ttft_ms_p50"]
    run.result["multiturn"] = rec
    run.save()
    print(
        f"multi-turn: {TURNS} turns, last turn {rec['prompt_tokens']} prompt tokens "
        f"({rec['on']['last_turn'][0]['cached_tokens']} cached): TTFT p50 prefix cache on "
        f"{rec['on']['ttft_ms_p50']:.1f} ms ({rec['on']['extend_attention']}), on with eager "
        f"cached steps {rec['on_eager']['ttft_ms_p50']:.1f} ms, on with the context gathered "
        f"{rec['on_gather']['ttft_ms_p50']:.1f} ms, off {rec['off']['ttft_ms_p50']:.1f} ms; on/off "
        f"{rec['ttft_ratio_on_off']:.2f}, eager {rec['ttft_ratio_on_eager_off']:.2f}, gathered "
        f"{rec['ttft_ratio_on_gather_off']:.2f}",
        flush=True,
    )
    for side, _ in SIDES:
        st = rec[side]["last_prefill"]
        print(
            f"  last turn's prefill, {side}: {'+'.join(st['paths'])}, host p50 "
            f"{_ms(st['host_ms_p50'])}, device p50 {_ms(st['device_ms_p50'])}",
            flush=True,
        )
    return rec


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f} ms"
