"""The multi-turn point of `qualflow bench engine`: sessions whose every turn re-sends the whole
history (the previous prompt, its greedy output, a new user part of seeded random tokens), run one
turn after the other, with the engine's prefix cache on and then off on the same bundle. It records
the last turn's TTFT (submission to first token, on the Task) per session and the median of each
side, the tokens the cache served, and prints the ratio on / off. On --tiny the sessions are small
and the figure means nothing; on a GPU they reach past 4k tokens."""

from __future__ import annotations

import statistics

import torch

from qualflow.runtime import GenerationRequest, SamplingParams

TURNS = 6
SESSIONS = 3


def sizes(tiny: bool) -> tuple[int, int, int]:
    """(first prompt, new tokens per later turn, output tokens per turn)."""
    return (64, 24, 8) if tiny else (1536, 512, 64)


def session(task, seed: int, tiny: bool) -> dict:
    """One session, turn after turn: its last turn's prompt length, TTFT (ms) and cached tokens."""
    first, per_turn, out = sizes(tiny)
    gen = torch.Generator().manual_seed(seed)
    new = lambda n: torch.randint(1000, 30000, (n,), generator=gen).tolist()  # noqa: E731
    prompt, final = new(first), None
    params = SamplingParams(max_new_tokens=out, temperature=0.0, ignore_eos=True)
    for turn in range(TURNS):
        if turn:
            prompt = prompt + final.token_ids + new(per_turn)
        final = task.generate_sync(GenerationRequest(f"mt{seed}-{turn}", prompt, params))
        if final.finish_reason != "length":
            raise RuntimeError(f"turn {turn}: {final.finish_reason} {final.error}")
    t = final.timing
    return {
        "prompt_tokens": len(prompt),
        "ttft_ms": (t.first_token_ns - t.submitted_ns) / 1e6,
        "cached_tokens": t.cached_tokens,
    }


def measure_multiturn(run) -> dict:
    """Both sides on `run` (engine.Run), each on its own load; the record is also in
    run.result["multiturn"]."""
    first, per_turn, out = sizes(run.cfg.tiny)
    context = first + (TURNS - 1) * (per_turn + out) + out
    rec: dict = {"turns": TURNS, "sessions": SESSIONS}
    for on in (True, False):
        task = run.load(prefix_caching=on, max_context=context)
        try:
            session(task, 10_000, run.cfg.tiny)  # warm: shapes compiled, not measured
            last = [session(task, s, run.cfg.tiny) for s in range(SESSIONS)]
        finally:
            run.release(task)
        rec["on" if on else "off"] = {
            "last_turn": last,
            "ttft_ms_p50": statistics.median(x["ttft_ms"] for x in last),
        }
    rec["prompt_tokens"] = rec["on"]["last_turn"][0]["prompt_tokens"]
    rec["ttft_ratio_on_off"] = rec["on"]["ttft_ms_p50"] / rec["off"]["ttft_ms_p50"]
    run.result["multiturn"] = rec
    run.save()
    print(
        f"multi-turn: {TURNS} turns, last turn {rec['prompt_tokens']} prompt tokens "
        f"({rec['on']['last_turn'][0]['cached_tokens']} cached): TTFT p50 prefix cache on "
        f"{rec['on']['ttft_ms_p50']:.1f} ms, off {rec['off']['ttft_ms_p50']:.1f} ms, "
        f"on/off {rec['ttft_ratio_on_off']:.2f}",
        flush=True,
    )
    return rec
