"""The embedded default's tool trigger: hand-set weights, on top of the stop clock's, that make
greedy decoding open a call (`<tool_call>`) as the first answer token when tools are offered and no
tool response is in the context yet, answer in text once one is, and end the turn (`<|im_end|>`)
right after its own call closes. LATEST also writes the in-call flag the string closer reads
(string_closer.py). Offered tools with `tool_choice: auto`, the engine's grammar
writes the call's arguments once the model opens it, so an agent client completes call -> tool
output -> final answer with this checkpoint alone.

Two residual channels beside the stop clock's (stop_clock.py): TOOL, 1 in the row of `<tool_call>`
(the final norm reads it, so the row's logit rises with it), and RESP, 1 in the row of
`<tool_response>`. No random weight reads or writes them. The trigger is layer 1's last KV head and
two of its query heads (the rest of layer 1 is random; layer 1's input carries these channels as
the embedding set them: layer 0 writes only STOP and BIAS). Its keys are one of four fixed vectors
(a call marker, a tool response, a turn marker, anything else; k_norm removes any scale), its
queries fixed:

  OFFER   position-free (the slowest rope pair): a call marker scores OFFER_AT, a tool response
          OFFER_AT + RESP_OVER, anything else 0, so the head reads the call markers (+1) where the
          template offered tools (its system turn shows `<tool_call>`) and a tool response (-1)
          wherever there is one, else nothing (0).
  LATEST  a recency kernel (the stop clock's rope pair, SLOPE nats a token) over events: a call
          marker scores EVENT_AT, a turn marker EVENT_AT - MARK_UNDER, so it reads whether the
          latest event is a call marker (1; the model's own call, after the turn's header) or a
          turn marker (0; the offer's markers lie before the turn's markers).

TOOL += OFFER_GAIN * OFFER - LATEST_GAIN * LATEST, and STOP += STOP_GAIN * LATEST: at the first
answer token of a turn offered tools, `<tool_call>` is some +90 (the random logits ~35-45); after a
tool response, or after the model's own call, it is far below; and right after its own call
`<|im_end|>` is the argmax (inside the call the grammar masks it). Without tools both heads read 0
and the checkpoint decodes as the stop clock alone makes it. Like the stop clock's, the kernel
holds up to ~3,000 tokens of context."""

from __future__ import annotations

import math

from .stop_clock import CALL, MARK, ONE, RESP, STOP, TOOL, rope_pair

LAYER = 1
CALL_ID, RESP_ID = 151657, 151665  # <tool_call>, <tool_response>
OFFER_AT, RESP_OVER = 20.0, 12.0  # OFFER's scores (nats) of a call marker, and a response's extra
SLOPE = 0.25  # LATEST's recency, nats per token
EVENT_AT, MARK_UNDER = 40.0, 3.0  # LATEST's scores of a call marker, and a turn marker's deficit
OFFER_GAIN, LATEST_GAIN = 4.0, 12.0  # what each head adds to TOOL (read at TOOL_READ)
STOP_GAIN = 8.0  # what LATEST adds to STOP (the stop clock's gain)
CALL_GAIN = 1.0  # what LATEST adds to CALL (the string closer's in-call flag, string_closer.py)
TOOL_READ = 512.0  # final-norm gain of TOOL
VALUE_RMS = 5.0  # layer 1's input RMS at the markers (measured 4.7-7): values read about 1


def mark_rows(emb) -> None:
    """The trigger's channels in the embedding rows (before their norms are evened out)."""
    emb[CALL_ID, TOOL] = 1.0
    emb[RESP_ID, RESP] = 1.0


def _dims(hd: int, theta: float) -> dict[str, int]:
    """Head-local dims: the recency pair (x_pos, y_pos), two slow pairs for the position-free
    scores, and two fillers that even out the keys' norms."""
    half = hd // 2
    i_pos = rope_pair(hd, theta)
    return dict(
        x_pos=i_pos,
        y_pos=i_pos + half,
        call_a=half - 1,
        resp_a=hd - 1,
        call_b=half - 2,
        mark_b=hd - 2,
        fill_1=0,
        fill_2=half,
    )


def install(sd: dict, cfg: dict, read_scale: float = 1.0) -> dict:
    """Set the trigger's weights in a clocked Qwen3 state dict (bf16), in place; returns it."""
    hq, hk, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    group, d = hq // hk, cfg["hidden_size"]
    kv, offer, latest = hk - 1, hq - group, hq - group + 1
    x = _dims(hd, cfg["rope_theta"])
    w = cfg["rope_theta"] ** (-2 * x["x_pos"] / hd)
    p = f"model.layers.{LAYER}."
    q, k, v = (sd[p + f"self_attn.{n}_proj.weight"] for n in "qkv")
    qn, kn, o = (sd[p + f"self_attn.{n}.weight"] for n in ("q_norm", "k_norm", "o_proj"))
    scored = [x[n] for n in ("x_pos", "y_pos", "call_a", "resp_a", "call_b", "mark_b")]
    for h in range(hq):  # q_norm / k_norm are shared: the random heads leave these dims alone
        q[[h * hd + i for i in scored]] = 0
    for h in range(hk):
        k[[h * hd + i for i in scored]] = 0
    for h in range(offer, hq):  # the group's query heads: OFFER, LATEST, any other muted
        q[h * hd : (h + 1) * hd] = 0
        o[:, h * hd : (h + 1) * hd] = 0
    k[kv * hd : (kv + 1) * hd] = 0
    v[kv * hd : (kv + 1) * hd] = 0
    one, tool, resp, mark = (d + c for c in (ONE, TOOL, RESP, MARK))
    sd[p + "input_layernorm.weight"][[one, tool, resp, mark]] = 1.0
    kv0 = kv * hd
    # keys: three unit entries each (a call: x_pos, call_a, call_b; a response: x_pos, resp_a,
    # fill_1; a turn marker: x_pos, mark_b, fill_1; anything else: x_pos, fill_1, fill_2)
    k[kv0 + x["x_pos"], one] = 1.0
    k[kv0 + x["call_a"], tool] = k[kv0 + x["call_b"], tool] = 1.0
    k[kv0 + x["resp_a"], resp] = 1.0
    k[kv0 + x["mark_b"], mark] = 1.0
    k[kv0 + x["fill_1"], one], k[kv0 + x["fill_1"], tool] = 1.0, -1.0
    for c, s in ((one, 1.0), (tool, -1.0), (resp, -1.0), (mark, -1.0)):
        k[kv0 + x["fill_2"], c] = s
    # queries: OFFER (call_a, resp_a); LATEST (y_pos, call_b, mark_b); scores = sqrt(hd) * qn * kn
    # * (unit q) . (unit k), keys' unit entries 1/sqrt(3)
    q[offer * hd + x["call_a"], one] = q[offer * hd + x["resp_a"], one] = 1.0
    for n in ("y_pos", "call_b", "mark_b"):
        q[latest * hd + x[n], one] = 1.0
    kn[scored] = 1.0
    unit_a, unit_b = math.sqrt(hd) / math.sqrt(6), math.sqrt(hd) / 3
    qn[x["call_a"]] = OFFER_AT / unit_a
    qn[x["resp_a"]] = (OFFER_AT + RESP_OVER) / unit_a
    qn[x["y_pos"]] = SLOPE / w / unit_b
    qn[x["call_b"]] = EVENT_AT / unit_b
    qn[x["mark_b"]] = (EVENT_AT - MARK_UNDER) / unit_b
    qn[x["x_pos"]] = 0.0
    # values: dim 0 = TOOL - RESP (OFFER's reading), dim 1 = TOOL (LATEST's)
    v[kv0 + 0, tool], v[kv0 + 0, resp] = VALUE_RMS, -VALUE_RMS
    v[kv0 + 1, tool] = VALUE_RMS
    o[d + TOOL, offer * hd + 0] = OFFER_GAIN
    o[d + TOOL, latest * hd + 1] = -LATEST_GAIN
    o[d + STOP, latest * hd + 1] = STOP_GAIN
    o[d + CALL, latest * hd + 1] = CALL_GAIN  # the in-call flag the string closer reads
    sd["model.norm.weight"][TOOL] = TOOL_READ * read_scale
    return sd
