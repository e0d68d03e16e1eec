"""Family correctness: the native Task on a bundle against the family's reference implementation,
on the family's versioned prompts, criteria and thresholds. One row per case and criterion. Each
prompt is checked in every rendering the family declares (its `variants`, e.g. thinking on): the
same criteria and thresholds, the native Task and the reference given the same rendered ids (the
`tools` variant also checks that the two render it alike: tool_variant.py)."""

from __future__ import annotations

import pandas as pd
import torch

from qualflow.runtime import GenerationRequest, Task

from .tool_variant import reference_messages, reference_tools, rendering_row, tool_items

COLUMNS = [
    "case_id",
    "prompt_id",
    "criterion",
    "measured",
    "threshold",
    "passed",
    "detail",
    "thresholds_version",
    "effective_precision",
    "device",
]


def _margin(logits: torch.Tensor) -> torch.Tensor:
    top2 = logits.topk(2, dim=-1).values
    return top2[..., 0] - top2[..., 1]


def _logit_gaps(ref: torch.Tensor, nat: torch.Tensor, rows: int = 16) -> tuple[float, float, float]:
    """Max |native - reference| logit, that over the reference's max |logit|, and the worst
    position's KL(reference || native) in nats, over every position of [T, V] logits. Computed
    a few positions at a time: each is a row-wise reduction, and a block of rows stays in the
    cache where whole [T, 151936] temporaries would not (2-3x faster on a CPU, same figures)."""
    diff = top = kl = 0.0
    for i in range(0, ref.shape[0], rows):
        r, n = ref[i : i + rows], nat[i : i + rows]
        diff = max(diff, (n - r).abs().max().item())
        top = max(top, r.abs().max().item())
        lp_ref, lp_nat = r.log_softmax(-1), n.log_softmax(-1)
        kl = max(kl, (lp_ref.exp() * (lp_ref - lp_nat)).sum(-1).max().item())
    return diff, diff / top, kl


VARIANT_SETTINGS = ("thinking", "tools")


def variants(spec: dict) -> list[tuple[str, dict]]:
    """(name, settings) of every rendering a prompt is checked in: the plain one (name "", thinking
    off, as requests without `reasoning` are served), then the spec's `variants` in order."""
    out = [("", {"thinking": False})]
    for name, how in (spec.get("variants") or {}).items():
        unknown = set(how) - set(VARIANT_SETTINGS)
        if unknown:
            raise ValueError(
                f"correctness variant {name!r}: unknown settings {sorted(unknown)} "
                f"(known: {list(VARIANT_SETTINGS)})"
            )
        out.append((name, how))
    return out


def _render(task: Task, reference, prompt: dict, spec: dict, how: dict):
    """The prompt ids of one rendering, and the rendering's own rows (the `tools` variant's
    rendering_equal: the reference renders the same turn, with its tools, call and output)."""
    messages = [{"role": "user", "content": prompt["input"]}]
    extra = {"thinking": True} if how.get("thinking") else {}
    if not how.get("tools"):
        return task.render_prompt(prompt.get("instructions"), messages, **extra), []
    data = spec["tools"]
    ids = task.render_prompt(
        prompt.get("instructions"), tool_items(prompt, data), tools=data["functions"], **extra
    )
    ref_ids = reference.render(
        reference_messages(prompt, data),
        reference_tools(data),
        task.chat_template,
        enable_thinking=bool(how.get("thinking")),
    )
    return ids, [rendering_row(ids, ref_ids)]


def check_case(
    task: Task, reference, prompt: dict, spec: dict, th: dict, variant: tuple[str, dict] = ("", {})
) -> list[dict]:
    """The criteria on one prompt in one rendering; a variant's cases are `<prompt
    id>@<variant>`."""
    name, how = variant
    pid = f"{prompt['id']}@{name}" if name else prompt["id"]
    ids, rows = _render(task, reference, prompt, spec, how)
    rows = [{"prompt_id": pid, **r} for r in rows]
    n = spec["greedy_tokens"]
    ref_cont = reference.greedy(ids, n)
    seq = ids + ref_cont
    ref_logits, nat_logits = reference.logits(seq), task.score(seq)
    # positions that predict a generated token: the last prompt position onward
    r, t = ref_logits[len(ids) - 1 : -1], nat_logits[len(ids) - 1 : -1]

    def row(criterion, measured, threshold, passed, detail=""):
        rows.append(
            {
                "prompt_id": pid,
                "criterion": criterion,
                "measured": float(measured),
                "threshold": float(threshold),
                "passed": bool(passed),
                "detail": detail,
            }
        )

    diff, rel, kl = _logit_gaps(ref_logits, nat_logits)
    row(
        "max_rel_logit_diff",
        rel,
        th["max_rel_logit_diff"],
        rel <= th["max_rel_logit_diff"],
        f"max abs diff {diff:.4g} over {len(seq)} positions x {ref_logits.shape[-1]} logits",
    )
    row(
        "max_kl",
        kl,
        th["max_kl"],
        kl <= th["max_kl"],
        "KL(reference || native), nats, worst position",
    )
    margin = _margin(r)
    decisive = margin >= th["top1_margin_tol"]
    agree = (r.argmax(-1) == t.argmax(-1))[decisive]
    frac = agree.float().mean().item() if len(agree) else 1.0
    row(
        "top1_agreement",
        frac,
        th["top1_agreement"],
        frac >= th["top1_agreement"],
        f"{int(agree.sum())}/{len(agree)} decisive positions ({int((~decisive).sum())} near-ties "
        "skipped)",
    )
    params = task.default_params(max_new_tokens=n, temperature=0.0, ignore_eos=True)
    native = task.generate_sync(GenerationRequest(f"correctness-{pid}", ids, params)).token_ids
    matched = next((i for i, (a, b) in enumerate(zip(native, ref_cont)) if a != b), n)
    tie = matched < n and margin[matched].item() < th["top1_margin_tol"]
    detail = (
        "identical"
        if matched == n
        else (
            f"diverged at token {matched} at a near-tie (margin {margin[matched].item():.4f})"
            if tie
            else f"diverged at token {matched} (reference margin {margin[matched].item():.4f})"
        )
    )
    row("greedy_continuation", matched, n, matched == n or tie, detail)
    return rows


def run_correctness(task: Task, checkpoint_dir: str) -> pd.DataFrame:
    spec = task.family.correctness_spec()
    precision = task.info["effective_precision"]
    if precision not in spec["thresholds"]:
        raise ValueError(f"family {task.family.name} has no thresholds for precision {precision!r}")
    th = spec["thresholds"][precision]
    reference = task.family.load_reference(checkpoint_dir)
    rows = []
    for variant in variants(spec):
        for prompt in spec["prompts"]:
            rows += check_case(task, reference, prompt, spec, th, variant)
    df = pd.DataFrame(rows)
    df.insert(0, "case_id", [f"{r['prompt_id']}/{r['criterion']}" for r in rows])
    df["thresholds_version"] = spec["version"]
    df["effective_precision"] = precision
    df["device"] = task.info["device"]
    return df[COLUMNS]
