"""The embedded default's stop clock: hand-set weights, on top of the seeded random ones, that make
greedy decoding end with `<|im_end|>` a bounded number of tokens after the last `<|im_start|>`
(the assistant header), in any Qwen3 forward pass (ours, transformers').

Five residual channels are reserved (the last five of `hidden_size`); no random weight reads or writes
them, so each keeps the value it is given here:
  ONE    1 in every embedding row (a constant)
  MARK   1 in the row of `<|im_start|>`, else 0
  STOP   written by the clock (below); STOP_IN in the row of `<|im_end|>`
  BIAS   written by the clock as the constant BIAS_LEVEL; -1 in the rows of tokens that must never be
         the argmax (every special token and the unused vocabulary rows), -STOP_OFFSET for `<|im_end|>`
  FILL   pads the rows with no random part, so that every embedding row has the same norm
Special tokens and unused rows carry no random part, so their logits are exactly their reserved-channel
terms; every ordinary token has a random part of the same norm and 0 in STOP and BIAS, so its logit is
its random logit with no offset.

The clock is one KV head of layer 0 (the last; its query heads CLOCK and GATE, any others in its group
muted). Layer 0 sees the raw embedding, whose rows all have the same RMS, so its RMSNorm is one scale
for every token, and q_norm / k_norm remove even that. The key of every token is then one of two fixed
vectors (MARK or not), the query a fixed vector, and the score of a query at position m for a key at
m - d (RoPE's relative form):
  CLOCK: -POS_SCORE * sin(w d) + MARK_SCORE * [key is <|im_start|>]   (w: the rope pair nearest 1e-3
         rad/token; sin(w d) rises monotonically over 0 <= w d <= pi/2 and stays above sin(w d) for
         every longer d up to `horizon` tokens, so the score falls with distance: a recency kernel of
         POS_SCORE * w nats per token)
  GATE:  GATE_SCORE * [key is <|im_start|>]                           (a position-free pair)
The value of a key is 1 - MARK (and a constant 1 for the BIAS level). So CLOCK reads the attention
mass off the latest <|im_start|>: about 1 / (1 + exp(MARK_SCORE - slope * d_last)) / (1 - e^-slope)),
a sigmoid in the distance d_last to it, near 0 for d_last below TURN_AT and near 1 beyond; GATE reads
the mass off every <|im_start|>, near 0 when there is one and 1 when there is none (a context with no
<|im_start|> never stops on the clock). STOP = STOP_GAIN * (CLOCK - 2 * GATE). A context of any length,
with any number of earlier <|im_start|> tokens, moves the turning point by a few tokens at most:
older markers only add mass further away (geometrically less), and the keys before the last marker
weigh exp(-slope * d).

The final norm reads STOP and BIAS (gains STOP_READ and BIAS_READ) and nothing else reserved, so the
logit of `<|im_end|>` is (STOP_IN * STOP_READ * STOP - STOP_OFFSET * BIAS_READ * BIAS_LEVEL) / rms: below
every ordinary token's while the clock is low, then above the largest random logit once it turns
(`check_clock` measures the margins on the written weights). Special tokens and unused rows sit at
-BIAS_READ * BIAS_LEVEL / rms, far below the random logits, so `<think>`, `</think>`, `<|im_start|>`
and `<|endoftext|>` are never the argmax; with stop tokens ignored (`ignore_eos`) decoding goes on
through ordinary tokens."""
from __future__ import annotations

import math

RESERVED = 4
ONE, MARK, STOP, BIAS = range(-4, 0)   # channel indices from the end of the hidden state

MARK_ID, STOP_ID = 151644, 151645            # <|im_start|>, <|im_end|>
FIRST_SPECIAL, N_TOKENS = 151643, 151669     # special tokens start here; rows from N_TOKENS on are unused

SLOPE = 0.5            # nats per token of the recency kernel
TURN_AT = 48           # tokens after <|im_start|> at which CLOCK crosses 1/2
STOP_GAIN = 8.0        # STOP = STOP_GAIN * (CLOCK - 2 GATE)
BIAS_LEVEL = 4.0
STOP_IN = 0.5          # <|im_end|>'s own STOP value (its input row)
STOP_OFFSET = 1.0      # <|im_end|>'s BIAS value is -STOP_OFFSET
BIAS_READ = 128.0      # final-norm gain of BIAS: special tokens at -BIAS_READ * BIAS_LEVEL / rms, about -30
STOP_READ = 512.0      # final-norm gain of STOP


def rope_pair(head_dim: int, theta: float, target: float = 1e-3) -> int:
    """Index i of the rope pair (dims i, i + head_dim/2) whose frequency is nearest `target`."""
    freqs = [theta ** (-2 * i / head_dim) for i in range(head_dim // 2)]
    return min(range(len(freqs)), key=lambda i: abs(math.log(freqs[i] / target)))


def _zero_reserved(sd: dict, cfg: dict) -> None:
    """No random weight reads or writes a reserved channel."""
    L = cfg["num_hidden_layers"]
    for i in range(L):
        p = f"model.layers.{i}."
        for n in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"):
            sd[p + n + ".weight"][:, -RESERVED:] = 0
        for n in ("self_attn.o_proj", "mlp.down_proj"):
            sd[p + n + ".weight"][-RESERVED:, :] = 0


def shape_embedding(emb, std: float):
    """Every row the same norm, sqrt(std^2 * random dims + 1): each row's random part is rescaled to
    make up what its reserved channels leave."""
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
    norm2 = std * std * r + 1.0
    e[:, :r] *= (norm2 - e[:, r:].pow(2).sum(1, keepdim=True)).sqrt() / e[:, :r].norm(dim=1, keepdim=True)
    return e, math.sqrt(norm2 / d)   # rows, and their common RMS


def _clock_head(sd: dict, cfg: dict, rms: float) -> None:
    """Layer 0's last KV head and its query heads (see the module docstring)."""
    hq, hk, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    group = hq // hk
    kv, clock, gate = hk - 1, hq - group, hq - group + 1
    i_pos = rope_pair(hd, cfg["rope_theta"])
    w = cfg["rope_theta"] ** (-2 * i_pos / hd)
    free = hd // 2 - 1                            # the slowest pair: at most 2048 * 2.4e-6 rad
    x_pos, y_pos, x_free, y_free = i_pos, i_pos + hd // 2, free, free + hd // 2
    p = "model.layers.0."
    q, k, v = (sd[p + f"self_attn.{n}_proj.weight"] for n in "qkv")
    qn, kn, o = sd[p + "self_attn.q_norm.weight"], sd[p + "self_attn.k_norm.weight"], sd[p + "self_attn.o_proj.weight"]
    clock_dims = [x_pos, y_pos, x_free, y_free]
    for h in range(hq):                          # random heads leave the clock's dims alone
        for dim in clock_dims:
            q[h * hd + dim] = 0
    for h in range(hk):
        for dim in clock_dims:
            k[h * hd + dim] = 0
    q[clock * hd:(clock + group) * hd] = 0
    k[kv * hd:(kv + 1) * hd] = 0
    v[kv * hd:(kv + 1) * hd] = 0
    o[:, clock * hd:(clock + group) * hd] = 0
    one, mark = cfg["hidden_size"] + ONE, cfg["hidden_size"] + MARK
    # keys: (x_pos, x_free, y_free) = (1, MARK, 1 - MARK) / sqrt(2): one norm for every token
    k[kv * hd + x_pos, one] = 1.0
    k[kv * hd + x_free, mark] = 1.0
    k[kv * hd + y_free, one], k[kv * hd + y_free, mark] = 1.0, -1.0
    # queries: CLOCK (y_pos, x_free) = (1, 1) / sqrt(2); GATE x_free = 1
    q[clock * hd + y_pos, one] = 1.0
    q[clock * hd + x_free, one] = 1.0
    q[gate * hd + x_free, one] = 1.0
    # scores = sqrt(hd) * qn * kn * (unit q) . (unit k): with kn = 1 on these dims,
    # POS = sqrt(hd) * qn[y_pos] / 2, MARK(CLOCK) = sqrt(hd) * qn[x_free] / 2, GATE = sqrt(hd) * qn[x_free] / sqrt(2)
    pos_score = SLOPE / w
    mark_score = SLOPE * TURN_AT + math.log(1 / (1 - math.exp(-SLOPE)))
    for dim in (x_pos, x_free, y_free):
        kn[dim] = 1.0
    qn[y_pos] = 2 * pos_score / math.sqrt(hd)
    qn[x_free] = 2 * mark_score / math.sqrt(hd)
    qn[y_free] = 0.0
    # values: dim 0 = 1 - MARK, dim 1 = 1 (layer 0's input is row / rms, with attn_norm 1 on ONE and MARK)
    sd[p + "input_layernorm.weight"][[one, mark]] = 1.0
    v[kv * hd + 0, one], v[kv * hd + 0, mark] = rms, -rms
    v[kv * hd + 1, one] = rms
    stop, bias = cfg["hidden_size"] + STOP, cfg["hidden_size"] + BIAS
    o[stop, clock * hd + 0] = STOP_GAIN
    o[bias, clock * hd + 1] = BIAS_LEVEL
    o[stop, gate * hd + 0] = -STOP_GAIN


def install(sd: dict, cfg: dict, embed_std: float, read_scale: float = 1.0) -> dict:
    """Shape a random Qwen3 state dict (bf16) in place into the clocked one; returns it. The embedding
    is rescaled in float64; every other value is set (and rounded) in bfloat16 once. `read_scale`:
    the final-norm gains' multiplier, the last layer's residual RMS over the tiny preset's."""
    import torch
    _zero_reserved(sd, cfg)
    emb, rms = shape_embedding(sd["model.embed_tokens.weight"], embed_std)
    sd["model.embed_tokens.weight"] = emb.to(torch.float32).to(torch.bfloat16).contiguous()
    _clock_head(sd, cfg, rms)
    norm = sd["model.norm.weight"]
    norm[-RESERVED:] = 0
    norm[STOP] = STOP_READ * read_scale
    norm[BIAS] = BIAS_READ * read_scale
    return sd
