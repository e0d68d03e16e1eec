"""kernels.varlen_choice on cpu: asked for cuDNN where it cannot run, the varlen attention falls
back to the reference loop; where it runs (stood in for by a kernel here), it is kept only for the
step kinds it agrees with the reference on, and the attention routes those steps to it."""

from __future__ import annotations

import torch

from qualflow.runtime.kernels import varlen_choice
from qualflow.runtime.kernels.attention import PagedAttention, StepMeta, varlen_sdpa

HEADS, KV, D = 4, 2, 8


def attention() -> PagedAttention:
    pool = torch.zeros(1, 2, 4, 16, KV, D)  # [layers, 2, blocks, block_size, kv heads, head dim]
    return PagedAttention(pool, 16, use_flash=False)


def reference_kernel(q, K, V, m: StepMeta):
    return varlen_sdpa(q.float(), K.float(), V.float(), m.q_lens, m.k_lens).to(q.dtype)


def top_left_causal(q, K, V, m: StepMeta):
    """A kernel that aligns the causal mask top-left: right on fresh steps, wrong on chunked."""
    return reference_kernel(q, K, V, StepMeta("varlen", None, q_lens=m.q_lens, k_lens=m.q_lens))


def test_cudnn_asked_for_on_cpu_falls_back_to_the_reference_loop():
    attn = attention()
    name = varlen_choice.choose_varlen(attn, HEADS, torch.device("cpu"), torch.float16, "cudnn")
    assert name == "sdpa-loop"
    assert not (attn.use_flash or attn.cudnn_fresh or attn.cudnn_chunked)


def test_a_kernel_that_refuses_every_case_is_not_chosen(monkeypatch):
    monkeypatch.setattr(varlen_choice, "cudnn_runs_here", lambda device, dtype: True)

    def refuses(*a):
        raise RuntimeError("no plan for this graph")

    monkeypatch.setattr(PagedAttention, "_cudnn", lambda self, *a: refuses(*a))
    attn = attention()
    assert varlen_choice.choose_varlen(
        attn, HEADS, torch.device("cpu"), torch.float16, "cudnn"
    ) == ("sdpa-loop")
    assert not attn.cudnn_fresh and not attn.cudnn_repeat_kv


def test_a_kernel_right_only_on_fresh_steps_runs_only_those(monkeypatch):
    monkeypatch.setattr(varlen_choice, "cudnn_runs_here", lambda device, dtype: True)
    calls = []

    def kernel(self, q, K, V, m):
        calls.append(m.ctx_slots is None)
        return top_left_causal(q, K, V, m)

    monkeypatch.setattr(PagedAttention, "_cudnn", kernel)
    attn = attention()
    name = varlen_choice.choose_varlen(attn, HEADS, torch.device("cpu"), torch.float16, "cudnn")
    assert name == "cudnn-fresh+sdpa-loop"
    assert attn.cudnn_fresh and not attn.cudnn_chunked
    # a fresh step goes to it; a step over the pool's context does not
    calls.clear()
    q, k = torch.randn(6, HEADS, D), torch.randn(6, KV, D)
    attn.meta = StepMeta("varlen", None, q_lens=[6], k_lens=[6])
    out = attn(0, q, k, k.clone())
    ref = varlen_sdpa(q, k, k.clone(), [6], [6]).reshape(6, HEADS * D)
    assert calls == [True] and torch.allclose(out, ref, atol=1e-3)
    attn.meta = StepMeta("varlen", None, q_lens=[2], k_lens=[6], ctx_slots=torch.arange(6))
    attn(0, q[:2], k[:2], k[:2].clone())
    assert calls == [True]


def test_a_kernel_that_agrees_everywhere_runs_every_varlen_step(monkeypatch):
    monkeypatch.setattr(varlen_choice, "cudnn_runs_here", lambda device, dtype: True)
    monkeypatch.setattr(PagedAttention, "_cudnn", lambda self, *a: reference_kernel(*a))
    attn = attention()
    name = varlen_choice.choose_varlen(attn, HEADS, torch.device("cpu"), torch.float16, "cudnn")
    assert name == "cudnn-varlen" and attn.cudnn_fresh and attn.cudnn_chunked


def test_flash_asked_for_never_tries_cudnn(monkeypatch):
    monkeypatch.setattr(varlen_choice, "cudnn_runs_here", lambda device, dtype: True)
    monkeypatch.setattr(PagedAttention, "_cudnn", lambda self, *a: reference_kernel(*a))
    attn = attention()
    assert varlen_choice.choose_varlen(attn, HEADS, torch.device("cpu"), torch.float16) == (
        "sdpa-loop"
    )
    assert not attn.cudnn_fresh
