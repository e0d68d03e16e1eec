"""The embedded default's stop clock: hand-set weights, on top of the seeded random ones, that make
greedy decoding end with `<|im_end|>` a bounded number of tokens after the latest `<|im_start|>`
(the assistant header), in any Qwen3 forward pass (ours, transformers').

Eight residual channels are reserved (the last eight of `hidden_size`; two are the tool trigger's,
tool_trigger.py, two the string closer's, string_closer.py). No random weight reads or
writes them, so each keeps the value set here: ONE    1 in every embedding row (a constant) MARK   1
in the rows of the turn markers `<|im_start|>` and `<|im_end|>`, else 0 STOP   STOP_IN in the row of
`<|im_end|>`; the clock adds its reading BIAS   -1 in the rows of every special token and every
unused row, -STOP_OFFSET for `<|im_end|>`, 0 for ordinary tokens; the clock adds the constant
BIAS_LEVEL Each row's random part is rescaled so that every embedding row has the same norm, so that
layer 0's input RMSNorm is one scale for every token.

The clock is layer 0's last KV head and two of its query heads, CLOCK and GATE (any other query head
of that group is muted; the other heads leave the dims it uses alone). Its keys read ONE and MARK,
its queries ONE, and q_norm / k_norm remove any scale, so a key is one of two fixed vectors (marker
or not) and a query one fixed vector. In RoPE's relative form the score of a key d tokens back is
CLOCK: -POS_SCORE * sin(w d) + MARK_SCORE * [key is a marker] GATE:  sqrt(2) * MARK_SCORE * [key is
a marker] with w the rope pair nearest 1e-3 rad/token: up to ~3,000 tokens of context (w d < pi -
0.05) sin(w d) never falls back below its value at the turn, so the score falls with distance, SLOPE
= POS_SCORE * w nats a token near the end (a recency kernel). GATE uses the slowest pair (2048
tokens turn it by 0.005 rad: position-free). A key's value is 1 - MARK (and 1, for BIAS). So CLOCK
reads the attention mass off the latest marker, d_last tokens back, 1 - 1 / (1 + exp(SLOPE * (d_last
- TURN_AT)))   (the rest of the context weighs 1 / (1 - e^-SLOPE)), a sigmoid in d_last that crosses
1/2 at TURN_AT; earlier markers, however many, weigh at least e^-SLOPE less each token further back,
and the tokens before the marker likewise, so neither the prompt's length nor its content moves the
turn by more than a few tokens. GATE reads the mass off every marker: ~0 when there is one, exactly
1 when there is none. STOP += STOP_GAIN * (CLOCK - GATE): a context with no marker never stops on
the clock; `<|im_end|>` itself is a marker, so with the stop ignored (`ignore_eos`) the clock starts
over after it.

The final norm reads STOP and BIAS (gains STOP_READ and BIAS_READ, times the preset's read scale)
and no other reserved channel, so over the random logits, which carry no offset: `<|im_end|>`
gets (STOP_IN * STOP_READ * STOP - STOP_OFFSET * BIAS_READ * BIAS_LEVEL) / rms: about -30 while
the clock is low, about +90 once it has turned (the largest random logit is ~35-45); every other
special token and unused row gets -BIAS_READ * BIAS_LEVEL / rms, about -30, so `<think>`,
`</think>`, `<|im_start|>` and `<|endoftext|>` are never the argmax. Greedy decoding (and
sampling) therefore ends with `<|im_end|>` at 42-45 output tokens for a prompt rendered with
thinking disabled, the same for every run of a prompt. What is measured rather than derived is
only the random logits' range at the turn (tests/artifacts/test_embedded.py decodes it in
transformers and natively)."""

from __future__ import annotations

import math

RESERVED = 8
ONE, MARK, STOP, BIAS = range(-4, 0)  # channel indices from the end of the hidden state
TOOL, RESP = -6, -5  # the tool trigger's (tool_trigger.py)
CALL, QUOTE = -8, -7  # the string closer's (string_closer.py)

MARK_ID, STOP_ID = 151644, 151645  # <|im_start|>, <|im_end|>
FIRST_SPECIAL = 151643  # special tokens, then unused rows, from here on

SLOPE = 0.5  # nats per token of the recency kernel
TURN_AT = 48  # tokens after the latest marker at which CLOCK crosses 1/2
STOP_GAIN = 8.0  # the clock adds STOP_GAIN * (CLOCK - GATE) to STOP
BIAS_LEVEL = 4.0
STOP_IN = 0.5  # <|im_end|>'s own STOP value (its input row)
STOP_OFFSET = 1.0  # <|im_end|>'s BIAS value is -STOP_OFFSET
BIAS_READ = (
    128.0  # final-norm gain of BIAS: special tokens at -BIAS_READ * BIAS_LEVEL / rms, about -30
)
STOP_READ = 512.0  # final-norm gain of STOP


def rope_pair(head_dim: int, theta: float, target: float = 1e-3) -> int:
    """Index i of the rope pair (dims i, i + head_dim/2) whose frequency is nearest `target`."""
    freqs = [theta ** (-2 * i / head_dim) for i in range(head_dim // 2)]
    return min(range(len(freqs)), key=lambda i: abs(math.log(freqs[i] / target)))


def _zero_reserved(sd: dict, cfg: dict) -> None:
    """No random weight reads or writes a reserved channel."""
    L = cfg["num_hidden_layers"]
    for i in range(L):
        p = f"model.layers.{i}."
        for n in (
            "self_attn.q_proj",
            "self_attn.k_proj",
            "self_attn.v_proj",
            "mlp.gate_proj",
            "mlp.up_proj",
        ):
            sd[p + n + ".weight"][:, -RESERVED:] = 0
        for n in ("self_attn.o_proj", "mlp.down_proj"):
            sd[p + n + ".weight"][-RESERVED:, :] = 0


def shape_embedding(emb, std: float, mark_rows=None):
    """Every row the same norm, sqrt(std^2 * random dims + 1): each row's random part is rescaled to
    make up what its reserved channels leave. `mark_rows(rows)`: sets further reserved channels
    (the tool trigger's) first."""
    import torch

    d = emb.shape[1]
    r = d - RESERVED
    e = emb.to(torch.float64)
    e[:, r:] = 0
    e[:, ONE] = 1.0
    e[[MARK_ID, STOP_ID], MARK] = 1.0
    e[STOP_ID, STOP] = STOP_IN
    e[FIRST_SPECIAL:, BIAS] = -1.0
    e[STOP_ID, BIAS] = -STOP_OFFSET
    if mark_rows is not None:
        mark_rows(e)
    norm2 = std * std * r + 1.0
    e[:, :r] *= (norm2 - e[:, r:].pow(2).sum(1, keepdim=True)).sqrt() / e[:, :r].norm(
        dim=1, keepdim=True
    )
    return e, math.sqrt(norm2 / d)  # rows, and their common RMS


def _clock_head(sd: dict, cfg: dict, rms: float) -> None:
    """Layer 0's last KV head and its query heads (see the module docstring)."""
    hq, hk, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    group = hq // hk
    kv, clock, gate = hk - 1, hq - group, hq - group + 1
    i_pos = rope_pair(hd, cfg["rope_theta"])
    w = cfg["rope_theta"] ** (-2 * i_pos / hd)
    free = hd // 2 - 1  # the slowest pair: at most 2048 * 2.4e-6 rad
    x_pos, y_pos, x_free, y_free = i_pos, i_pos + hd // 2, free, free + hd // 2
    p = "model.layers.0."
    q, k, v = (sd[p + f"self_attn.{n}_proj.weight"] for n in "qkv")
    qn, kn, o = (
        sd[p + "self_attn.q_norm.weight"],
        sd[p + "self_attn.k_norm.weight"],
        sd[p + "self_attn.o_proj.weight"],
    )
    clock_dims = [x_pos, y_pos, x_free, y_free]
    for h in range(hq):  # random heads leave the clock's dims alone
        for dim in clock_dims:
            q[h * hd + dim] = 0
    for h in range(hk):
        for dim in clock_dims:
            k[h * hd + dim] = 0
    q[clock * hd : (clock + group) * hd] = 0
    k[kv * hd : (kv + 1) * hd] = 0
    v[kv * hd : (kv + 1) * hd] = 0
    o[:, clock * hd : (clock + group) * hd] = 0
    one, mark = cfg["hidden_size"] + ONE, cfg["hidden_size"] + MARK
    # keys: (x_pos, x_free, y_free) = (1, MARK, 1 - MARK) / sqrt(2): one norm for every token
    k[kv * hd + x_pos, one] = 1.0
    k[kv * hd + x_free, mark] = 1.0
    k[kv * hd + y_free, one], k[kv * hd + y_free, mark] = 1.0, -1.0
    # queries: CLOCK (y_pos, x_free) = (1, 1) / sqrt(2); GATE x_free = 1
    q[clock * hd + y_pos, one] = 1.0
    q[clock * hd + x_free, one] = 1.0
    q[gate * hd + x_free, one] = 1.0
    # scores = sqrt(hd) * qn * kn * (unit q) . (unit k): with kn = 1 on these dims, POS = sqrt(hd) *
    # qn[y_pos] / 2, MARK(CLOCK) = sqrt(hd) * qn[x_free] / 2, GATE = sqrt(hd) * qn[x_free] / sqrt(2)
    pos_score = SLOPE / w
    mark_score = SLOPE * TURN_AT + math.log(1 / (1 - math.exp(-SLOPE)))
    for dim in (x_pos, x_free, y_free):
        kn[dim] = 1.0
    qn[y_pos] = 2 * pos_score / math.sqrt(hd)
    qn[x_free] = 2 * mark_score / math.sqrt(hd)
    qn[y_free] = 0.0
    # values: dim 0 = 1 - MARK, dim 1 = 1 (layer 0's input is row / rms, with attn_norm 1 on ONE and
    # MARK)
    sd[p + "input_layernorm.weight"][[one, mark]] = 1.0
    v[kv * hd + 0, one], v[kv * hd + 0, mark] = rms, -rms
    v[kv * hd + 1, one] = rms
    stop, bias = cfg["hidden_size"] + STOP, cfg["hidden_size"] + BIAS
    o[stop, clock * hd + 0] = STOP_GAIN
    o[bias, clock * hd + 1] = BIAS_LEVEL
    o[stop, gate * hd + 0] = -STOP_GAIN


def install(sd: dict, cfg: dict, embed_std: float, read_scale: float = 1.0, mark_rows=None) -> dict:
    """Shape a random Qwen3 state dict (bf16) in place into the clocked one; returns it. The
    embedding is rescaled in float64; every other value is set (and rounded) in bfloat16 once.
    `read_scale`: the final-norm gains' multiplier, the last layer's residual RMS over the tiny
    preset's. `mark_rows`: shape_embedding's."""
    import torch

    _zero_reserved(sd, cfg)
    emb, rms = shape_embedding(sd["model.embed_tokens.weight"], embed_std, mark_rows)
    sd["model.embed_tokens.weight"] = emb.to(torch.float32).to(torch.bfloat16).contiguous()
    _clock_head(sd, cfg, rms)
    norm = sd["model.norm.weight"]
    norm[-RESERVED:] = 0
    norm[STOP] = STOP_READ * read_scale
    norm[BIAS] = BIAS_READ * read_scale
    return sd
