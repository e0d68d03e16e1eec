"""Whether the fp16 family-correctness misses are our engine's or fp16's own, on a GPU: for each
correctness prompt (plain and `@tools`) on the Qwen3-0.6B shape (seeded random weights), the
max relative logit difference and KL against the float32 reference of our engine (fp16, the
default settings) and of transformers' own Qwen3ForCausalLM in fp16 on the same GPU (SDPA
attention, and eager attention), teacher-forced on the same ids; prints the prompts any of them
misses the fp16 thresholds on, and writes every figure to OUT_DIR/correctness_hf_fp16.json.
    [DEVICE=cuda SHAPE=qwen3-0.6b] python3 benchmarks/correctness_hf_fp16.py OUT_DIR"""

import json
import os
import sys
from pathlib import Path

import torch

from qualflow.bench.machine import prepare_bundle
from qualflow.correctness.criteria import _logit_gaps, _render
from qualflow.runtime import EngineConfig, load_task

out = Path(sys.argv[1])
device, shape = os.environ.get("DEVICE", "cuda"), os.environ.get("SHAPE", "qwen3-0.6b")
work = Path("/tmp/correctness-hf-fp16")
ckpt = prepare_bundle(work, shape)
task = load_task(
    work / "bundle",
    EngineConfig(device=device, max_batch=1, max_context=1024, engine_process="off"),
)
spec = task.family.correctness_spec()
th = spec["thresholds"]["float16"]
reference = task.family.load_reference(str(ckpt))
cases = []
for prompt in spec["prompts"]:
    for how in ({}, {"tools": True}):
        ids, _ = _render(task, reference, prompt, spec, how)
        seq = ids + reference.greedy(ids, spec["greedy_tokens"])
        cases.append((prompt["id"] + ("@tools" if how else ""), seq, reference.logits(seq)))


def hf_fp16(attn: str):
    from transformers import Qwen3ForCausalLM

    m = Qwen3ForCausalLM.from_pretrained(str(ckpt), dtype=torch.float16, attn_implementation=attn)
    m = m.to(device).eval()

    @torch.inference_mode()
    def score(seq):
        return m(torch.tensor([seq], device=device)).logits[0].float().cpu()

    return score


res = {}
for name, score in [
    ("qualflow fp16", task.score),
    ("transformers fp16 sdpa", hf_fp16("sdpa")),
    ("transformers fp16 eager", hf_fp16("eager")),
]:
    res[name] = {}
    for pid, seq, ref in cases:
        _, rel, kl = _logit_gaps(ref, score(seq).to(ref.device))
        res[name][pid] = {"rel": rel, "kl": kl, "tokens": len(seq)}
    missed = {
        pid: {k: round(v[k], 4) for k in ("rel", "kl")}
        for pid, v in res[name].items()
        if v["rel"] > th["max_rel_logit_diff"] or v["kl"] > th["max_kl"]
    }
    print(f"{name}: misses {len(missed)} of {len(cases)} prompts: {missed}", flush=True)
task.close()
out.mkdir(parents=True, exist_ok=True)
res["thresholds"] = {k: th[k] for k in ("max_rel_logit_diff", "max_kl")}
(out / "correctness_hf_fp16.json").write_text(json.dumps(res, indent=1))
