"""Endpoint correctness: is an external Responses endpoint numerically the checkpoint we pinned?

The family's reference runs greedy on the family's fixed prompts; the endpoint is asked for the same
prompts through the API (temperature 0, streamed, `max_output_tokens` = the family's greedy_tokens)
and its text is compared with the reference continuation token by token: the first divergence is
the first reference token whose text no longer continues the endpoint's text. Criterion, length,
near-tie tolerance and version are family data (`endpoint_correctness_spec()`). One row per prompt,
in the correctness table's columns."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from qualflow.families import family_of_config, get_family

from .criteria import COLUMNS, _margin


@dataclass(frozen=True)
class Divergence:
    """Where the endpoint's greedy text leaves the reference continuation."""

    matched: int  # reference tokens the endpoint reproduced
    compared: int  # reference tokens compared (greedy_tokens, or up to a stop token)
    reference_piece: str | None  # the reference token's text at the divergence
    endpoint_text: str | None  # the endpoint's text from there (a few characters)


def first_divergence(ref_pieces: list[str], endpoint_text: str, strip_leading: bool) -> Divergence:
    """`ref_pieces[k]` is the text of reference tokens[:k+1] (cumulative decode). The k-th token
    matches when that text is a prefix of the endpoint's; a character still incomplete after token k
    (decoded as U+FFFD until the token that completes it) is left out of that test."""

    def norm(t: str) -> str:
        t = t.rstrip("\ufffd")
        return t.lstrip() if strip_leading else t

    text = endpoint_text.lstrip() if strip_leading else endpoint_text
    n = len(ref_pieces)
    for k, upto in enumerate(ref_pieces):
        if not text.startswith(norm(upto)):
            before = norm(ref_pieces[k - 1]) if k else ""
            return Divergence(k, n, norm(upto)[len(before) :], text[len(before) : len(before) + 24])
    return Divergence(n, n, None, None)


def _checkpoint_family(checkpoint_dir: str):
    cfg = json.loads((Path(checkpoint_dir) / "config.json").read_text())
    return get_family(family_of_config(cfg))


def _render(checkpoint_dir: str, family, prompt: dict) -> tuple[list[int], object]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(checkpoint_dir) / "tokenizer.json"))
    template = json.loads((Path(checkpoint_dir) / "tokenizer_config.json").read_text())[
        "chat_template"
    ]
    ids = family.render_prompt(
        tok, template, prompt.get("instructions"), [{"role": "user", "content": prompt["input"]}]
    )
    return ids, tok


def endpoint_greedy_text(
    client, model: str, prompt: dict, n: int, request_id: str, headers: dict
) -> tuple[str, int | None]:
    """The endpoint's greedy output text (output_text deltas, streamed) and its
    usage.output_tokens."""
    kw = {"instructions": prompt["instructions"]} if prompt.get("instructions") else {}
    events = client.responses.create(
        model=model,
        input=prompt["input"],
        temperature=0,
        max_output_tokens=n,
        stream=True,
        store=False,
        extra_headers={"X-Request-ID": request_id, **headers},
        **kw,
    )
    events = list(events)
    usage = getattr(getattr(events[-1], "response", None), "usage", None) if events else None
    return (
        "".join(e.delta for e in events if e.type == "response.output_text.delta"),
        getattr(usage, "output_tokens", None),
    )


def _client(url: str, api_key: str | None, timeout_s: float):
    import openai

    return openai.OpenAI(
        base_url=url.rstrip("/") + "/v1",
        api_key=api_key or "qualflow-local",
        timeout=timeout_s,
        max_retries=0,
    )


@dataclass(frozen=True)
class _Case:
    """One prompt's reference: its rendered ids, the greedy continuation, where the endpoint stops
    (`upto`), and the text of the continuation's first k+1 tokens for each k below it."""

    ids: list[int]
    cont: list[int]
    upto: int
    pieces: list[str]
    tok: object


def _reference_case(checkpoint_dir, family, reference, prompt, n: int, stops: set) -> _Case:
    ids, tok = _render(checkpoint_dir, family, prompt)
    cont = reference.greedy(ids, n)
    upto = next(
        (i for i, t in enumerate(cont) if t in stops), len(cont)
    )  # the endpoint stops there
    pieces = [tok.decode(cont[: k + 1], skip_special_tokens=True) for k in range(upto)]
    return _Case(ids, cont, upto, pieces, tok)


def _near_tie(reference, case: _Case, d: Divergence, text: str, strip: bool, tol: float):
    """(tolerated, margins): a divergence is tolerated only at a near-tie, and only if the
    endpoint took the runner-up."""
    tok, cont = case.tok, case.cont
    logits = reference.logits(case.ids + cont)[len(case.ids) - 1 : -1]
    margins = _margin(logits)
    runner_up = int(logits[d.matched].topk(2).indices[1])
    alt = tok.decode(cont[: d.matched] + [runner_up], skip_special_tokens=True).rstrip("\ufffd")
    alt = alt.lstrip() if strip else alt
    tie = margins[d.matched].item() < tol and (text.lstrip() if strip else text).startswith(alt)
    return tie, margins


def _outcome(case: _Case, d: Divergence, n: int, n_out, tie: bool, margins) -> tuple[bool, str]:
    """(passed, detail) of one prompt."""
    pieces, upto = case.pieces, case.upto
    # the endpoint generated every token but did not deliver text the reference cannot decode as
    # valid UTF-8 either (a stack may hold back an invalid byte sequence): not comparable as
    # text
    tail = (
        pieces[-1][len(pieces[d.matched - 1]) if d.matched else 0 :]
        if d.matched < d.compared
        else ""
    )
    undeliverable = d.endpoint_text == "" and "\ufffd" in tail and (n_out or 0) >= d.compared
    if undeliverable:
        detail = (
            f"identical for {d.matched} tokens; the endpoint generated {n_out} tokens but "
            f"delivered no text for the last {d.compared - d.matched}, which decode to invalid "
            f"UTF-8 ({tail!r}): "
            "not comparable as text"
        )
    elif d.matched == d.compared:
        detail = f"identical for {d.compared} tokens" + (
            "" if upto == n else f" (reference stops at token {upto})"
        )
    else:
        detail = (
            f"first divergence at token {d.matched} of {d.compared}: reference "
            f"{d.reference_piece!r}, endpoint {d.endpoint_text!r} (reference top-1 margin "
            f"{margins[d.matched].item():.4f}"
            + (", a near-tie and the endpoint took the runner-up: tolerated)" if tie else ")")
        )
    return d.matched == d.compared or tie or undeliverable, detail


def run_endpoint_correctness(
    url: str,
    model: str,
    checkpoint_dir: str,
    *,
    api_key: str | None = None,
    headers: dict | None = None,
    timeout_s: float = 300.0,
) -> pd.DataFrame:
    family = _checkpoint_family(checkpoint_dir)
    spec = family.endpoint_correctness_spec()
    n, tol = int(spec["greedy_tokens"]), float(spec["near_tie_margin"])
    strip = bool(spec.get("ignore_leading_whitespace", False))
    gen = Path(checkpoint_dir) / "generation_config.json"
    stops = set(family.stop_token_ids(json.loads(gen.read_text()) if gen.exists() else {}))
    reference = family.load_reference(checkpoint_dir)
    client = _client(url, api_key, timeout_s)
    rows = []
    for prompt in spec["prompts"]:
        case = _reference_case(checkpoint_dir, family, reference, prompt, n, stops)
        rid = f"endpoint-correctness-{prompt['id']}"
        try:
            text, n_out = endpoint_greedy_text(client, model, prompt, n, rid, headers or {})
        except Exception as e:  # noqa: BLE001 - a failed request is a failed case, with its reason
            rows.append(
                {
                    "prompt_id": prompt["id"],
                    "criterion": spec["criterion"],
                    "measured": float("nan"),
                    "threshold": float(case.upto),
                    "passed": False,
                    "detail": f"request {rid} failed: {type(e).__name__}: {str(e)[:300]}",
                }
            )
            continue
        d = first_divergence(case.pieces, text, strip)
        tie, margins = False, None
        if d.matched < d.compared:
            tie, margins = _near_tie(reference, case, d, text, strip, tol)
        passed, detail = _outcome(case, d, n, n_out, tie, margins)
        rows.append(
            {
                "prompt_id": prompt["id"],
                "criterion": spec["criterion"],
                "measured": float(d.matched),
                "threshold": float(d.compared),
                "passed": passed,
                "detail": detail,
            }
        )
    df = pd.DataFrame(rows)
    df.insert(0, "case_id", [f"{r['prompt_id']}/{r['criterion']}" for r in rows])
    df["thresholds_version"] = spec["version"]
    df["effective_precision"] = "endpoint"  # the endpoint's precision is not ours to know
    df["device"] = "endpoint"
    return df[COLUMNS]
