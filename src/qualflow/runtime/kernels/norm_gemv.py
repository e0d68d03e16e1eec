"""The one-row GEMV (kernels.gemv) with the RMSNorm before it in the same kernel: a decode step of
one row then runs each layer's qkv and gate_up projections without the add_rms_norm kernel before
them, two launches fewer a layer.

For one row the normalised input is tiny (the hidden size, 2 KB in fp16), so every program computes
it itself: it reads the residual stream `h` and the previous projection's output `delta` whole,
sums them, takes the inverse RMS, and normalises each chunk of K as it walks the weight. Program 0
also writes the sum, the new residual stream, to its own buffer (never over `h`, which the other
programs are reading). The roundings are the add_rms_norm kernel's (kernels.elementwise): the sum,
the normalised value before the weight, the weight product; so the projection sees the input the
unfused step gives it, up to the order of the sum of squares.

The kernel is gemv's own (its NORM form: the input's chunks normalised as they are read), with
gemv's launch settings and programmatic dependent launch."""

from __future__ import annotations

import torch

from .checks import agrees
from .gemv import Launch, available, run
from .reference import ref_add_rms_norm
from .skinny_gemm import reference, reference_gate_up_silu

__all__ = ["add_norm_gemv", "add_norm_gemv_gate_up_silu", "reference_norm", "self_check"]


def _check(h, delta, w_norm, w) -> None:
    """What the GEMV's own check (gemv.run) does not cover: the norm weight and the residual."""
    if w_norm.shape != (h.shape[-1],):
        raise ValueError(
            f"norm_gemv takes one row: h {tuple(h.shape)}, w_norm {tuple(w_norm.shape)}, "
            f"w {tuple(w.shape)}"
        )
    if delta is not None and (delta.shape != h.shape or delta.stride(-1) != 1):
        raise ValueError(f"norm_gemv: delta {tuple(delta.shape)} is not h's {tuple(h.shape)}")


def add_norm_gemv(h, delta, w_norm, eps: float, w, launch: Launch | None = None, pdl=False):
    """h, delta (or None) [1, K]; w_norm [K]; w [N, K]. Returns (h + delta, rms_norm(h + delta) *
    w_norm @ w.T) as [1, K] and [1, N] in h's dtype: add_rms_norm, then the GEMV."""
    _check(h, delta, w_norm, w)
    return run(h, w, False, pdl, launch, (delta, w_norm, eps))


def add_norm_gemv_gate_up_silu(
    h, delta, w_norm, eps: float, w, launch: Launch | None = None, pdl=False
):
    """As `add_norm_gemv`, with SwiGLU's gate_up weight w [2I, K]: the second output is
    silu(gate) * up [1, I], as gemv_gate_up_silu gives it."""
    _check(h, delta, w_norm, w)
    return run(h, w, True, pdl, launch, (delta, w_norm, eps))


def reference_norm(h, delta, w_norm, eps: float, w, glu: bool = False):
    """The unfused step's torch reference: (h', y) with h', x = ref_add_rms_norm(h, delta, w_norm)
    and y the projection of x (float32, rounded once; the GLU form with `glu`)."""
    h2, x = ref_add_rms_norm(h, delta, w_norm, eps)
    return h2, (reference_gate_up_silu if glu else reference)(x.float(), w.float())


def self_check(
    device: torch.device,
    dtype: torch.dtype,
    shapes: list[tuple[int, int]],
    glu: list[bool],
    pdl: bool = False,
    tol: float = 1e-2,
) -> str | None:
    """Both forms on this device at each (N, K) weight shape (`glu`: which are gate_up weights),
    with and without a residual, launched as the engine will (`pdl`), against the reference: the
    new residual stream exactly, the projection within `tol`. None when all agree, else why not
    (the caller then keeps the add_rms_norm kernel before the GEMV)."""
    if not available():
        return "triton is not installed"
    g = torch.Generator(device=device).manual_seed(0)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, device=device, generator=g) * scale).to(dtype)

    try:
        for (n, k), gate_up in zip(shapes, glu):
            w, w_norm = rand(n, k, scale=k**-0.5), rand(k, scale=0.1) + 1
            kernel = add_norm_gemv_gate_up_silu if gate_up else add_norm_gemv
            for delta in (None, rand(1, k)):
                h = rand(1, k)
                h2, y = kernel(h, delta, w_norm, 1e-6, w, pdl=pdl)
                r2, ry = reference_norm(h, delta, w_norm, 1e-6, w, gate_up)
                if not (torch.equal(h2, r2) and agrees(y, ry, tol)):
                    return f"{kernel.__name__} disagrees with the reference at {n} x {k}"
    except Exception as e:  # noqa: BLE001 - this build cannot compile or run the kernel
        return f"{type(e).__name__}: {e}"
    return None
