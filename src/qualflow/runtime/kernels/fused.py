"""The fused ops of one decoder layer (fewer kernels per decode step): Triton kernels on CUDA
with a plain-torch reference (kernels.reference) that is also the CPU path:
  - `add_rms_norm`: residual add and the next RMSNorm in one pass (or the RMSNorm alone), and
    `silu_mul`: SwiGLU's silu(gate) * up (their kernels: kernels.elementwise);
  - `qk_norm_rope`: per-head RMSNorm of q and k, RoPE and, when given a destination, the store of
    k and v into the paged KV cache (its kernel: kernels.qk_norm_rope).

Each Triton kernel rounds where the torch reference rounds (the residual sum, the normalised
value before the weight, the weight product, silu before the product), so the two differ only by
the order of the fp32 sum of squares and the rounding of exp/rsqrt. `FusedOps` is what the
family's model graph calls; it picks the kernel per call (a CUDA tensor and a kernel that passed
`self_check`) or the reference, and at skinny rows the skinny GEMM's forms (kernels.skinny_gemm).
Nothing reads back to the host, so every op can be captured in a CUDA graph."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import gemv, norm_gemv, skinny_gemm
from .checks import agrees
from .destination import KvDestination
from .elementwise import tri_add_rms_norm, tri_silu_mul
from .qk_norm_rope import QkTile, qk_tile_for, tri_qk_norm_rope
from .reference import ref_add_rms_norm, ref_qk_norm_rope, ref_silu_mul

try:
    import triton
except ImportError:  # CPU-only installs: the reference runs
    triton = None


def available() -> bool:
    return triton is not None


class FusedOps:
    """The ops the family's fused layer path calls. A call runs its Triton kernel when the tensor
    is on CUDA and `self_check` passed on this device (`use_triton`), the torch reference
    otherwise. `linear` and `gate_up_silu` run the skinny GEMM for steps of at most `skinny_rows`
    rows (0: never), torch's GEMM otherwise; a step of one row the one-row GEMV (kernels.gemv)
    with `one_row_gemv`; and with `norm_gemv` too, `norm_linear` and `norm_gate_up_silu` run the
    add_rms_norm before it in the same kernel (kernels.norm_gemv). `pdl`: the kernels launch with
    programmatic dependent launch (kernels.pdl)."""

    def __init__(
        self,
        use_triton: bool = False,
        any_device: bool = False,
        skinny_rows: int = 0,
        pdl: bool = False,
        one_row_gemv: bool = False,
        norm_gemv: bool = False,
    ):
        self.use_triton = use_triton and available()
        self.any_device = (
            any_device  # Triton's interpreter (TRITON_INTERPRET=1) runs CPU tensors: tests
        )
        self.skinny_rows = min(skinny_rows, skinny_gemm.MAX_ROWS) if self.use_triton else 0
        self.pdl = pdl and self.use_triton
        self.one_row_gemv = one_row_gemv and self.skinny_rows > 0
        self.norm_gemv = norm_gemv and self.one_row_gemv

    def _skinny(self, x: torch.Tensor) -> bool:
        return x.shape[0] <= self.skinny_rows and self._tri(x)

    def linear(self, x, w):
        if self._skinny(x):
            if self.one_row_gemv and x.shape[0] == 1:
                return gemv.gemv(x, w, pdl=self.pdl)
            return skinny_gemm.skinny_gemm(x, w, pdl=self.pdl)
        return F.linear(x, w)

    def gate_up_silu(self, x, w_gu):
        """silu(gate) * up of the fused gate_up projection: one kernel at skinny rows, else the
        GEMM and `silu_mul`."""
        if self._skinny(x):
            if self.one_row_gemv and x.shape[0] == 1:
                return gemv.gemv_gate_up_silu(x, w_gu, pdl=self.pdl)
            return skinny_gemm.skinny_gate_up_silu(x, w_gu, pdl=self.pdl)
        return self.silu_mul(self.linear(x, w_gu))

    def _one_row_norm(self, h: torch.Tensor) -> bool:
        return self.norm_gemv and h.shape[0] == 1 and self._skinny(h)

    def norm_linear(self, h, delta, w_norm, eps: float, w):
        """(h', linear(x, w)) where h', x = add_rms_norm(h, delta, w_norm, eps): one kernel on a
        step of one row with `norm_gemv`."""
        if self._one_row_norm(h):
            return norm_gemv.add_norm_gemv(h, delta, w_norm, eps, w, pdl=self.pdl)
        h, x = self.add_rms_norm(h, delta, w_norm, eps)
        return h, self.linear(x, w)

    def norm_gate_up_silu(self, h, delta, w_norm, eps: float, w_gu):
        """(h', gate_up_silu(x, w_gu)) where h', x = add_rms_norm(h, delta, w_norm, eps): one
        kernel on a step of one row with `norm_gemv`."""
        if self._one_row_norm(h):
            return norm_gemv.add_norm_gemv_gate_up_silu(h, delta, w_norm, eps, w_gu, pdl=self.pdl)
        h, x = self.add_rms_norm(h, delta, w_norm, eps)
        return h, self.gate_up_silu(x, w_gu)

    def _tri(self, x: torch.Tensor) -> bool:
        return self.use_triton and (x.is_cuda or self.any_device)

    def add_rms_norm(self, h, delta, w, eps: float):
        if self._tri(h):
            return tri_add_rms_norm(h, delta, w, eps, pdl=self.pdl)
        return ref_add_rms_norm(h, delta, w, eps)

    def qk_norm_rope(
        self,
        qkv,
        w_qn,
        w_kn,
        cos_table,
        sin_table,
        positions,
        heads: int,
        kv_heads: int,
        eps: float,
        dest: KvDestination | None = None,
    ):
        D = w_qn.shape[0]
        if self._tri(qkv) and D & (D - 1) == 0:
            return tri_qk_norm_rope(
                qkv, w_qn, w_kn, (cos_table, sin_table), positions, heads, eps, dest, self.pdl
            )
        return ref_qk_norm_rope(
            qkv, w_qn, w_kn, cos_table, sin_table, positions, heads, kv_heads, eps, dest
        )

    def silu_mul(self, y):
        if self._tri(y):
            return tri_silu_mul(y, pdl=self.pdl)
        return ref_silu_mul(y)


def self_check(
    device: torch.device,
    dtype: torch.dtype,
    heads: int,
    kv_heads: int,
    head_dim: int,
    hidden: int,
    intermediate: int,
    pdl: bool = False,
    tol: float = 1e-2,
) -> str | None:
    """Run every kernel once on this device, launched as the engine will (`pdl`), against the
    reference at the model's shapes; None when
    all agree, else why not (the caller then keeps the reference: a kernel this build cannot
    compile, or one that disagrees, never serves)."""
    if not available():
        return "triton is not installed"
    if head_dim & (head_dim - 1):
        return f"head_dim {head_dim} is not a power of two"
    g = torch.Generator(device=device).manual_seed(0)
    rnd = lambda *s: torch.randn(*s, device=device, generator=g).to(dtype)  # noqa: E731
    N, eps = 5, 1e-6
    try:
        h, dl, w = rnd(N, hidden), rnd(N, hidden), rnd(hidden)
        for delta in (dl, None):
            got, ref = (
                tri_add_rms_norm(h, delta, w, eps, pdl=pdl),
                ref_add_rms_norm(h, delta, w, eps),
            )
            if not (agrees(got[0], ref[0], tol) and agrees(got[1], ref[1], tol)):
                return "add_rms_norm disagrees with the reference"
        y = rnd(N, 2 * intermediate)
        if not agrees(tri_silu_mul(y, pdl=pdl), ref_silu_mul(y), tol):
            return "silu_mul disagrees with the reference"
        for tile in (
            QkTile(),
            qk_tile_for(1 << 20),
        ):  # the decode steps' launch and the prefill steps'
            if not _qk_norm_rope_agrees(rnd, g, heads, kv_heads, head_dim, eps, pdl, tile, tol):
                return f"qk_norm_rope ({tile}) disagrees with the reference"
    except Exception as e:  # noqa: BLE001 - this build cannot compile or run a kernel
        return f"{type(e).__name__}: {e}"
    return None


def _qk_norm_rope_agrees(
    rnd,
    g: torch.Generator,
    heads: int,
    kv_heads: int,
    head_dim: int,
    eps: float,
    pdl: bool,
    tile: QkTile,
    tol: float,
) -> bool:
    """tri_qk_norm_rope launched with `tile` against the reference: 37 tokens (tiles of 16 end
    part-full) at scattered positions, stored at scattered slots of a cache of 48."""
    device = g.device
    n, slots_n, dtype = 37, 48, rnd(1).dtype
    qkv = rnd(n, (heads + 2 * kv_heads) * head_dim)
    wq, wk = rnd(head_dim), rnd(head_dim)
    ang = torch.rand(64, head_dim, device=device, generator=g) * 6.28
    pos = torch.randint(0, 64, (n,), device=device, generator=g)
    slots = torch.randperm(slots_n, device=device, generator=g)[:n]
    outs = []
    for triton_kernel in (True, False):
        kc = torch.zeros(slots_n, kv_heads, head_dim, device=device, dtype=dtype)
        vc = torch.zeros_like(kc)
        dest = KvDestination(kc, vc, slots)
        if triton_kernel:
            q, k, v = tri_qk_norm_rope(
                qkv, wq, wk, (ang.cos(), ang.sin()), pos, heads, eps, dest, pdl, tile
            )
        else:
            q, k, v = ref_qk_norm_rope(
                qkv, wq, wk, ang.cos(), ang.sin(), pos, heads, kv_heads, eps, dest
            )
        outs.append((q, k, v, kc, vc))
    return all(agrees(a, b, tol) for a, b in zip(*outs))
