"""Which kernel runs a varlen (prefill) attention step, chosen at load and checked against the
reference (`varlen_sdpa`) on the device, like the other kernels:
  - flash attention's varlen kernel (`choose_flash`): CUDA fp16/bf16, grouped K/V as they are, else
    repeated to every query head; else the reference loop (CPU, and a build without it);
  - asked for (`cudnn`), cuDNN's SDPA with ragged offsets (`choose_cudnn`), tried only on CUDA
    compute capability 9.0 (Hopper) and later, checked apart on a fresh step (every sequence from
    position 0, padded with empty sequences as a captured prefill step is) and a chunked one
    (queries the last of a longer context): a case it fails stays on flash varlen, or the loop.
The name returned is what the engine reports as its `varlen_attention`."""

from __future__ import annotations

import torch

from .attention import PagedAttention, StepMeta, varlen_sdpa

CHUNKED = ([5, 1, 37], [9, 20, 37])  # (query lengths, context lengths)
FRESH = ([7, 33, 0, 0], [7, 33, 0, 0])


def _case(attn: PagedAttention, heads: int, lens, device, dtype, seed: int):
    kv, d = attn.k[0].shape[2], attn.k[0].shape[3]
    q_lens, k_lens = lens
    g = torch.Generator(device=device).manual_seed(seed)

    def rand(n, h):
        return torch.randn(n, h, d, device=device, dtype=dtype, generator=g)

    def cu(ls):
        return torch.tensor([0, *torch.tensor(ls).cumsum(0).tolist()], dtype=torch.int32).to(device)

    q, K, V = rand(sum(q_lens), heads), rand(sum(k_lens), kv), rand(sum(k_lens), kv)
    meta = StepMeta("varlen", None, cu(q_lens), cu(k_lens), list(q_lens), list(k_lens))
    return q, K, V, meta


def agrees(kernel, attn: PagedAttention, heads: int, lens, device, dtype) -> bool:
    """Whether `kernel(q, K, V, meta)` matches the reference on a case of these lengths."""
    q, K, V, m = _case(attn, heads, lens, device, dtype, seed=0)
    ref = varlen_sdpa(q.float(), K.float(), V.float(), m.q_lens, m.k_lens)
    try:
        out = kernel(q, K, V, m).float()
    except Exception:  # noqa: BLE001 - this build's kernel refuses the case
        return False
    return bool(torch.isfinite(out).all()) and float((out - ref).norm() / ref.norm()) < 1e-2


def choose_flash(attn: PagedAttention, heads: int, device: torch.device, dtype: torch.dtype) -> str:
    """On CUDA, check the flash varlen path against the reference on a case both chunked (q shorter
    than k) and fresh, with grouped K/V as they are and repeated; keep the first that agrees."""
    attn.use_flash = False
    if device.type != "cuda" or dtype not in (torch.float16, torch.bfloat16):
        return "sdpa-loop"
    for native in (True, False):
        attn.gqa_native = native
        if agrees(attn._flash, attn, heads, CHUNKED, device, dtype):
            attn.use_flash = True
            return "flash-varlen" + ("" if native else "-repeat-kv")
    return "sdpa-loop"


def cudnn_runs_here(device: torch.device, dtype: torch.dtype) -> bool:
    """CUDA fp16/bf16 on compute capability 9.0 or later, with cuDNN."""
    return (
        device.type == "cuda"
        and dtype in (torch.float16, torch.bfloat16)
        and torch.backends.cudnn.is_available()
        and torch.cuda.get_device_capability(device) >= (9, 0)
    )


def choose_cudnn(attn: PagedAttention, heads: int, device, dtype) -> tuple[bool, bool]:
    """(fresh, chunked): the cases cuDNN's varlen SDPA agrees with the reference on, with grouped
    K/V as they are, else repeated; its flags on `attn` set accordingly."""
    attn.cudnn_fresh = attn.cudnn_chunked = False
    if not cudnn_runs_here(device, dtype):
        return False, False
    for repeat in (False, True):
        attn.cudnn_repeat_kv = repeat
        fresh = agrees(attn._cudnn, attn, heads, FRESH, device, dtype)
        chunked = fresh and agrees(attn._cudnn, attn, heads, CHUNKED, device, dtype)
        if fresh:
            attn.cudnn_fresh, attn.cudnn_chunked = True, chunked
            return True, chunked
    attn.cudnn_repeat_kv = False
    return False, False


def choose_varlen(attn: PagedAttention, heads: int, device, dtype, want: str = "flash") -> str:
    """The varlen kernels of `attn` (`want`: flash, or cudnn where it runs and agrees) and their
    name: flash-varlen[-repeat-kv] or sdpa-loop; with cuDNN, cudnn-varlen (every varlen step) or
    cudnn-fresh+<the flash choice> (fresh steps only)."""
    flash = choose_flash(attn, heads, device, dtype)
    if want != "cudnn":
        return flash
    fresh, chunked = choose_cudnn(attn, heads, device, dtype)
    kv = "-repeat-kv" if attn.cudnn_repeat_kv else ""
    if fresh and chunked:
        return "cudnn-varlen" + kv
    return f"cudnn-fresh{kv}+{flash}" if fresh else flash
