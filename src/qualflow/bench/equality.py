"""Does an engine variant compute what the run's baseline variant computes? Each variant of a run
gets the same probe: a few seeded prompts decoded greedily one at a time (so batch shapes match
across variants: the b1 decode graph, a single-sequence prefill), and the teacher-forced logits of
the baseline's output sequences (an eager forward, no cache).

A variant passes when its greedy tokens equal the baseline's, or first differ at a near-tie (the
baseline's top-1 margin there below the family's fp16 `top1_margin_tol`), and its teacher-forced
logits stay within the family's fp16 `max_rel_logit_diff` of the baseline's. With seeded random
weights the output distribution is flat, so near-ties are common and rounding-level differences
(another reduction order, a padded GEMM) may legitimately flip one."""

from __future__ import annotations

import random

from qualflow.families.qwen3 import FAMILY
from qualflow.runtime import GenerationRequest

PROMPT_LENS = (16, 100, 300, 1000)


def _requests(task, new_tokens: int) -> list[GenerationRequest]:
    rng = random.Random(7)
    return [
        GenerationRequest(
            f"probe-{i}",
            [rng.randrange(1000, 100_000) for _ in range(n)],
            task.default_params(max_new_tokens=new_tokens, temperature=0.0, ignore_eos=True),
        )
        for i, n in enumerate(PROMPT_LENS)
    ]


def probe(task, base: dict | None = None, new_tokens: int = 48, tiny: bool = False) -> dict:
    """{"prompts", "tokens", "logits"}: greedy outputs, and the teacher-forced logits (rows that
    predict each output token, float32 on the CPU) of `base`'s sequences (of these, when no
    base)."""
    reqs = _requests(task, 8 if tiny else new_tokens)
    if tiny:
        reqs = [GenerationRequest(r.request_id, r.prompt_token_ids[:24], r.params) for r in reqs]
    prompts = [r.prompt_token_ids for r in reqs]
    tokens = [task.generate_sync(r).token_ids for r in reqs]
    seqs = base["tokens"] if base is not None else tokens
    logits = []
    for p, out in zip(prompts, seqs):
        full = task.engine.score(p + out)  # [T, V] float32, CPU
        logits.append(full[len(p) - 1 : len(p) - 1 + len(out)].clone())
        del full
    return {"prompts": prompts, "tokens": tokens, "logits": logits}


def compare(base: dict, other: dict, precision: str = "float16") -> dict:
    """The verdict on `other` against `base` (both from `probe`, other's logits over base's
    tokens)."""
    th = FAMILY.correctness_spec()["thresholds"][precision]
    rel = max(
        float((o - b).abs().max() / b.abs().max()) for b, o in zip(base["logits"], other["logits"])
    )
    out = {
        "tokens_equal": base["tokens"] == other["tokens"],
        "max_rel_logit_diff": rel,
        "max_rel_logit_diff_limit": th["max_rel_logit_diff"],
        "divergences": [],
    }
    for i, (bt, ot, bl) in enumerate(zip(base["tokens"], other["tokens"], base["logits"])):
        k = next((j for j, (x, y) in enumerate(zip(bt, ot)) if x != y), None)
        if k is None:
            continue
        top2 = bl[k].topk(2).values
        margin = float(top2[0] - top2[1])
        out["divergences"].append(
            {
                "prompt": i,
                "position": k,
                "base_margin": margin,
                "near_tie": margin < th["top1_margin_tol"],
            }
        )
    out["passed"] = rel <= th["max_rel_logit_diff"] and all(
        d["near_tie"] for d in out["divergences"]
    )
    return out
