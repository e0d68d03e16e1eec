"""The embedded default's string closer: hand-set weights, on top of the stop clock's and the tool
trigger's, that make greedy decoding close a JSON string a few tokens after it opened, inside the
model's own tool call. Under the engine's grammar any character may follow inside an unbounded
`"type": "string"` value until the closing quote; without this the random weights never pick one,
so a call with a free string argument ran to the token limit.

Two residual channels beside the others (stop_clock.py): QUOTE, QUOTE_IN in the rows of the tokens
that hold a `"` and no backslash (1,271 of them: each closes an open string, `"`, `",`, `"}}`, ` "`,
`abc"`, ...; the grammar keeps those that fit), and CALL, 0 in every row. No random weight reads or
writes them. QUOTE_IN is small, so a quote row's own input barely moves its logit (QUOTE_READ *
QUOTE_IN^2 / rms, a few hundredths of a nat); the heads below read QUOTE at gain 1 / QUOTE_IN.

- CALL is the in-call flag: the tool trigger's LATEST head (1 when the latest event is a call
  marker, tool_trigger.py) also writes its reading to CALL (its CALL_GAIN).
- The quote clock is layer LAYER's last KV head and one of its query heads (any other query head of
  that group is muted), the stop clock's head with QUOTE in place of MARK: the score of a key d
  tokens back is -POS_SCORE * sin(w d) + QUOTE_SCORE * [key holds a quote], a recency kernel of
  SLOPE nats a token, and the value is 1 - [quote]: it reads the attention mass off the latest
  quote, a sigmoid in the tokens since it that crosses 1/2 at CLOSE_AT, and adds it to CALL.
- One neuron of layer LAYER's MLP (the last) is the AND: silu(GATE_GAIN * (CALL - THRESHOLD)) times
  a constant, written to QUOTE at DOWN_GAIN. CALL is about 1 in a call, plus about 1 once the
  latest quote is CLOSE_AT tokens back; outside a call it is at most about 1. Below the threshold
  the neuron's output is ~0 (silu of a large negative number); above it QUOTE grows large.

The final norm reads QUOTE at QUOTE_READ, so once the string has run CLOSE_AT tokens every quote
row's logit rises far above the random ones (~35-45) and the grammar's allowed quote closes it.
Outside a call (text answers, reasoning, a text answer after a tool response) the neuron stays off
and the checkpoint decodes as the stop clock and the tool trigger alone make it; right after the
call closes, the trigger's `<|im_end|>` comes before the clock turns."""

from __future__ import annotations

import functools
import math

from .stop_clock import CALL, ONE, QUOTE, rope_pair

LAYER = 3
QUOTE_IN = 1 / 32  # the QUOTE value of a quote row (exact in bfloat16)
SLOPE = 0.5  # nats per token of the quote clock's recency kernel
CLOSE_AT = 6  # tokens after the latest quote at which the clock crosses 1/2
CLOCK_GAIN = 1.0  # what the quote clock adds to CALL
VALUE_RMS = 9.0  # about layer LAYER's input RMS: the clock's values read about 1
THRESHOLD = 1.4  # CALL above which the neuron fires
GATE_GAIN, UP_GAIN = 400.0, 40.0  # the neuron's gate and up weights (the input RMS ~5 divides)
DOWN_GAIN = 64.0
QUOTE_READ = 256.0  # final-norm gain of QUOTE


@functools.lru_cache(maxsize=1)
def quote_ids() -> tuple[int, ...]:
    """Ids of the ordinary tokens whose bytes hold a `"` and no backslash."""
    from .tokenizer_files import rank_bytes

    return tuple(i for i, b in enumerate(rank_bytes()) if b'"' in b and b"\\" not in b)


def mark_rows(emb) -> None:
    """The closer's channel in the embedding rows (before their norms are evened out)."""
    emb[list(quote_ids()), QUOTE] = QUOTE_IN


def _clock_head(sd: dict, cfg: dict) -> None:
    """Layer LAYER's last KV head and its first query head (see the module docstring)."""
    hq, hk, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    d = cfg["hidden_size"]
    group = hq // hk
    kv, clock = hk - 1, hq - group
    i_pos = rope_pair(hd, cfg["rope_theta"])
    w = cfg["rope_theta"] ** (-2 * i_pos / hd)
    free = hd // 2 - 1
    x_pos, y_pos, x_free, y_free = i_pos, i_pos + hd // 2, free, free + hd // 2
    p = f"model.layers.{LAYER}."
    q, k, v = (sd[p + f"self_attn.{n}_proj.weight"] for n in "qkv")
    qn, kn, o = (sd[p + f"self_attn.{n}.weight"] for n in ("q_norm", "k_norm", "o_proj"))
    dims = [x_pos, y_pos, x_free, y_free]
    for h in range(hq):  # q_norm / k_norm are shared: the random heads leave these dims alone
        q[[h * hd + i for i in dims]] = 0
    for h in range(hk):
        k[[h * hd + i for i in dims]] = 0
    q[clock * hd : (clock + group) * hd] = 0
    o[:, clock * hd : (clock + group) * hd] = 0
    k[kv * hd : (kv + 1) * hd] = 0
    v[kv * hd : (kv + 1) * hd] = 0
    one, quote = d + ONE, d + QUOTE
    sd[p + "input_layernorm.weight"][[one, quote]] = 1.0
    # keys: (x_pos, x_free, y_free) = (1, Q, 1 - Q) / sqrt(2), Q = QUOTE / QUOTE_IN (0 or 1)
    k[kv * hd + x_pos, one] = 1.0
    k[kv * hd + x_free, quote] = 1.0 / QUOTE_IN
    k[kv * hd + y_free, one], k[kv * hd + y_free, quote] = 1.0, -1.0 / QUOTE_IN
    # the query: (y_pos, x_free) = (1, 1) / sqrt(2); scores as the stop clock's
    q[clock * hd + y_pos, one] = 1.0
    q[clock * hd + x_free, one] = 1.0
    quote_score = SLOPE * CLOSE_AT + math.log(1 / (1 - math.exp(-SLOPE)))
    kn[[x_pos, x_free, y_free]] = 1.0
    qn[y_pos] = 2 * (SLOPE / w) / math.sqrt(hd)
    qn[x_free] = 2 * quote_score / math.sqrt(hd)
    qn[[x_pos, y_free]] = 0.0
    # the value: dim 0 = 1 - Q
    v[kv * hd + 0, one], v[kv * hd + 0, quote] = VALUE_RMS, -VALUE_RMS / QUOTE_IN
    o[d + CALL, clock * hd + 0] = CLOCK_GAIN


def _neuron(sd: dict, cfg: dict) -> None:
    """Layer LAYER's last MLP neuron: QUOTE += silu(gain * (CALL - THRESHOLD)) * const."""
    d, j = cfg["hidden_size"], cfg["intermediate_size"] - 1
    p = f"model.layers.{LAYER}."
    gate, up, down = (sd[p + f"mlp.{n}_proj.weight"] for n in ("gate", "up", "down"))
    one, call = d + ONE, d + CALL
    sd[p + "post_attention_layernorm.weight"][[one, call]] = 1.0
    gate[j], up[j], down[:, j] = 0, 0, 0
    gate[j, call], gate[j, one] = GATE_GAIN, -GATE_GAIN * THRESHOLD
    up[j, one] = UP_GAIN
    down[d + QUOTE, j] = DOWN_GAIN


def install(sd: dict, cfg: dict, read_scale: float = 1.0) -> dict:
    """Set the closer's weights in a clocked, triggered Qwen3 state dict (bf16), in place; returns
    it. The trigger's CALL write is tool_trigger.install's."""
    _clock_head(sd, cfg)
    _neuron(sd, cfg)
    sd["model.norm.weight"][QUOTE] = QUOTE_READ * read_scale
    return sd
