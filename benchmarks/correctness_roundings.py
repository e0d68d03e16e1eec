"""Which fp16 rounding of the layer makes the family-correctness prompts drift from the float32
reference, on a GPU: the Qwen3-0.6B shape (seeded random weights), each correctness prompt (plain
and `@tools`) teacher-forced through the fused layer's torch ops: q/k-norm rounded as the layer
before 2026-12-07 did, as now (once), and now with the residual sum or silu rounded once too, and
the compiled plain layer (`--no-fused-kernels`); prints each one's KL against the reference, and
writes each one's KL and max relative logit difference to the JSON.
    python3 benchmarks/correctness_roundings.py OUT_DIR"""

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from qualflow.bench.machine import prepare_bundle
from qualflow.correctness.criteria import _logit_gaps, _render
from qualflow.runtime import EngineConfig, load_task
from qualflow.runtime.kernels import fused
from qualflow.runtime.kernels import reference as R


class Ops(fused.FusedOps):
    """The fused layer's torch ops; `res32`: the residual sum normed before its rounding;
    `qk_rounded`: q/k-norm rounding the normed value and the weight product (the layer before
    2026-12-07); `silu32`: silu(gate) * up rounded once."""

    def __init__(self, res32=False, qk_rounded=False, silu32=False):
        super().__init__(use_triton=False)
        self.res32, self.qk_rounded, self.silu32 = res32, qk_rounded, silu32

    def add_rms_norm(self, h, delta, w, eps):
        if not self.res32:
            return R.ref_add_rms_norm(h, delta, w, eps)
        s = h.float() + (delta.float() if delta is not None else 0)
        n = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps)
        return s.to(h.dtype), (w * n.to(h.dtype))

    def qk_norm_rope(self, qkv, w_qn, w_kn, cos_t, sin_t, pos, heads, kv_heads, eps, dest=None):
        if not self.qk_rounded:
            return R.ref_qk_norm_rope(
                qkv, w_qn, w_kn, cos_t, sin_t, pos, heads, kv_heads, eps, dest
            )
        N, D = qkv.shape[0], w_qn.shape[0]
        q, k, v = qkv.split([heads * D, kv_heads * D, kv_heads * D], dim=-1)
        cos, sin = cos_t[pos][:, None], sin_t[pos][:, None]

        def nr(x, w):
            xf = R.ref_rms_norm(x, w, eps).float()  # normed, rounded, times w, rounded
            half = D // 2
            rot = torch.cat([-xf[..., half:], xf[..., :half]], -1)
            return (xf * cos + rot * sin).to(x.dtype)

        return (
            nr(q.view(N, heads, D), w_qn),
            nr(k.view(N, kv_heads, D), w_kn),
            v.view(N, kv_heads, D),
        )

    def silu_mul(self, y):
        if not self.silu32:
            return R.ref_silu_mul(y)
        g, u = y.float().chunk(2, -1)
        return (F.silu(g) * u).to(y.dtype)

    def linear(self, x, w):
        return F.linear(x, w)


out = Path(sys.argv[1])
work = Path("/tmp/correctness-roundings")
ckpt = prepare_bundle(work, "qwen3-0.6b")
task = load_task(
    work / "bundle",
    EngineConfig(device="cuda", max_batch=1, max_context=1024, engine_process="off"),
)
spec = task.family.correctness_spec()
reference = task.family.load_reference(str(ckpt))
model, orig = task.model, task.model.ops
cases = []
for prompt in spec["prompts"]:
    for how in ({"tools": True}, {}):
        ids, _ = _render(task, reference, prompt, spec, how)
        seq = ids + reference.greedy(ids, spec["greedy_tokens"])
        cases.append((prompt["id"] + ("@tools" if how else ""), seq, reference.logits(seq)))
res = {}
for name, ops in [
    ("qk_rounded (before)", Ops(qk_rounded=True)),
    ("now", Ops()),
    ("now, residual in fp32", Ops(res32=True)),
    ("now, silu in fp32", Ops(silu32=True)),
    ("now, both", Ops(res32=True, silu32=True)),
]:
    model.ops = ops
    res[name] = {}
    for pid, seq, ref in cases:
        diff, rel, kl = _logit_gaps(ref, task.score(seq))
        res[name][pid] = {"rel": rel, "kl": kl}
    worst = max(v["kl"] for v in res[name].values())
    print(
        name,
        "worst kl",
        round(worst, 4),
        {
            k: round(v["kl"], 4)
            for k, v in res[name].items()
            if "@tools" in k or k == "long_context"
        },
        flush=True,
    )
# the compiled plain halves (what --no-fused-kernels serves)
model.ops = None
model.pre, model.post = (
    torch.compile(model._pre, dynamic=True),
    torch.compile(model._post, dynamic=True),
)
res["compiled_plain"] = {}
for pid, seq, ref in cases:
    diff, rel, kl = _logit_gaps(ref, task.score(seq))
    res["compiled_plain"][pid] = {"rel": rel, "kl": kl}
print(
    "compiled_plain",
    {
        k: round(v["kl"], 4)
        for k, v in res["compiled_plain"].items()
        if "@tools" in k or k == "long_context"
    },
    flush=True,
)
model.ops = orig
task.close()
(out / "correctness_roundings.json").write_text(json.dumps(res, indent=1))
