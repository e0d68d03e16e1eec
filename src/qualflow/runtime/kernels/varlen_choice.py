"""Which kernel runs a varlen (prefill) attention step, chosen at load and checked against the
reference (`varlen_sdpa`) on the device, like the other kernels:
  - flash attention's varlen kernel (`choose_flash`): CUDA fp16/bf16, grouped K/V as they are, else
    repeated to every query head; else the reference loop (CPU, and a build without it);
  - asked for (`cudnn`), cuDNN's SDPA with ragged offsets (`choose_cudnn`), tried only on CUDA
    compute capability 9.0 (Hopper) and later, checked apart on a fresh step (every sequence from
    position 0, padded with empty sequences as a captured prefill step is) and a chunked one
    (queries the last of a longer context): a case it fails stays on flash varlen, or the loop.
The name returned is what the engine reports as its `varlen_attention`. Steps past position 0
take the extend kernel where `choose_extend` checked it (reported as `extend_attention`); a fresh
step of one sequence takes cuDNN's dense SDPA where `choose_solo` checked it
(`solo_prefill_attention`)."""

from __future__ import annotations

import logging

import torch

from . import checks, paged_extend
from .attention import PagedAttention, StepMeta, varlen_sdpa

CHUNKED = ([5, 1, 37], [9, 20, 37])  # (query lengths, context lengths)
FRESH = ([7, 33, 0, 0], [7, 33, 0, 0])
SOLO = ([45], [45])  # one fresh sequence (a dense step)
log = logging.getLogger(__name__)


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
    return checks.agrees(out, ref, 1e-2)


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
    """The varlen kernels of `attn` (`want`: flash, or cudnn where it runs and agrees; extend takes
    flash here, the extend kernel being choose_extend's) and their
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


def choose_solo(attn: PagedAttention, heads: int, device, dtype, want: str = "varlen") -> str:
    """How a fresh step of one sequence (a lone prompt) attends, and the name the engine reports:
    as any varlen step (`want` varlen), or (`want` cudnn) through cuDNN's dense causal SDPA, with
    grouped K/V as they are, else repeated, where it runs and agrees with the reference here; off
    CUDA, torch's dense SDPA (the reference that CPU tests run)."""
    attn.solo = ""
    if want != "cudnn":
        return "varlen"
    if device.type != "cuda":
        attn.solo = "sdpa"
        return "dense-sdpa"
    if not cudnn_runs_here(device, dtype):
        return "varlen (cuDNN's SDPA needs compute capability 9.0+, fp16 or bf16)"
    for mode in ("cudnn", "cudnn-repeat-kv"):
        attn.solo = mode
        if agrees(lambda q, K, V, m: attn._dense(q, K, V), attn, heads, SOLO, device, dtype):
            return f"{mode}-dense"
    attn.solo = ""
    log.warning("cuDNN's dense SDPA failed or disagreed with the reference: varlen")
    return "varlen (cuDNN's dense SDPA failed or disagreed with the reference)"


def choose_extend(attn: PagedAttention, heads: int, device, dtype, want: str = "kernel") -> str:
    """Whether steps past position 0 read their context through the extend kernel (`want`:
    kernel, on CUDA fp16/bf16 with Triton, where it agrees with the reference here) or gather it
    for the varlen kernel; the name the engine reports."""
    attn.extend_kernel, attn.heads = False, heads
    if want != "kernel":
        return "gather"
    if device.type != "cuda" or dtype not in (torch.float16, torch.bfloat16):
        return "gather (the extend kernel runs on CUDA fp16/bf16)"
    if not paged_extend.available():
        return "gather (no Triton)"
    attn.sms = torch.cuda.get_device_properties(device).multi_processor_count
    why = extend_disagrees(heads, attn.k[0], attn.block_size, attn.sms)
    if why is not None:
        log.warning("extend kernel off: %s", why)
        return f"gather (the kernel {why})"
    attn.extend_kernel = True
    return "paged-extend"


def extend_disagrees(heads: int, k_cache, block_size: int, sms: int, run=None) -> str | None:
    """None when `run` (the extend kernel) agrees with the varlen reference on `k_cache`'s device
    on a step of two sequences past position 0 (one split and several), else why not."""
    run = run or paged_extend.paged_extend
    dev, dt = k_cache.device, k_cache.dtype
    kv, d = k_cache.shape[2], k_cache.shape[3]
    g = torch.Generator(device=dev).manual_seed(0)
    starts, q_lens = [70, 3], [37, 130]
    k_lens = [s + n for s, n in zip(starts, q_lens)]
    nb = [-(-k // block_size) for k in k_lens]
    kc = torch.randn(sum(nb), block_size, kv, d, device=dev, dtype=dt, generator=g)
    vc = torch.randn(sum(nb), block_size, kv, d, device=dev, dtype=dt, generator=g)
    order = torch.randperm(sum(nb), generator=torch.Generator().manual_seed(0)).tolist()
    table = torch.zeros(2, max(nb), dtype=torch.int64)
    table[0, : nb[0]] = torch.tensor(order[: nb[0]])
    table[1, : nb[1]] = torch.tensor(order[nb[0] :])
    q = torch.randn(sum(q_lens), heads, d, device=dev, dtype=dt, generator=g)
    K = torch.cat([kc[table[i, : nb[i]]].flatten(0, 1)[: k_lens[i]] for i in range(2)])
    V = torch.cat([vc[table[i, : nb[i]]].flatten(0, 1)[: k_lens[i]] for i in range(2)])
    ref = varlen_sdpa(q.float(), K.float(), V.float(), q_lens, k_lens)
    block_m = paged_extend.Launch().block_m
    tiles = torch.from_numpy(paged_extend.tiles_for(q_lens, starts, block_m)).to(dev)
    ctx = torch.tensor(k_lens, dtype=torch.int64, device=dev)
    for splits in (1, paged_extend.splits_for(len(tiles), heads, sms)):
        try:
            out = run(q, kc, vc, tiles, table.to(dev), ctx, splits).float()
        except Exception as e:  # noqa: BLE001 - this build cannot run it
            return f"{type(e).__name__}: {e}"
        if not checks.agrees(out, ref, 1e-2):
            err = float((out - ref).norm() / ref.norm())
            return f"disagrees with the reference at {splits} split(s) (relative error {err:.3g})"
    return None
